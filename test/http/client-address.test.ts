import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidOptionError } from '../../src/index.js';
import { addressKey, clientAddressConfig, findClientAddress, parseAddress } from '../../src/http/client-address.js';
import { isIPv4, isIPv6, SocketAddress } from 'node:net';
import fc from 'fast-check';

describe('parseAddress', () => {
  it('turns every spelling of an address into a bare IP', () => {
    assert.equal(parseAddress('::ffff:203.0.113.7'), '203.0.113.7');
    assert.equal(parseAddress('::FFFF:203.0.113.7'), '203.0.113.7');
    assert.equal(parseAddress(' 203.0.113.7 '), '203.0.113.7');
    assert.equal(parseAddress('203.0.113.7:4711'), '203.0.113.7');
    assert.equal(parseAddress('[2001:DB8::1]:4711'), '2001:db8::1');
    assert.equal(parseAddress('[2001:db8::1]'), '2001:db8::1');
    assert.equal(parseAddress('fe80::1%eth0'), 'fe80::1');
  });

  it('writes IPv6 in one spelling, and IPv4-mapped IPv6 in any spelling as IPv4', () => {
    assert.equal(parseAddress('2001:DB8:0:0:0:0:0:1'), '2001:db8::1');
    assert.equal(parseAddress('2001:db8:0000::0001'), '2001:db8::1');
    for (const mapped of [
      '0:0:0:0:0:ffff:203.0.113.8',
      '::ffff:cb00:7108',
      '0000:0000:0000:0000:0000:FFFF:CB00:7108',
      '[::ffff:cb00:7108]:80',
    ]) {
      assert.equal(parseAddress(mapped), '203.0.113.8', mapped);
    }
    assert.equal(parseAddress('::1'), '::1');
    assert.equal(parseAddress('64:ff9b::cb00:7108'), '64:ff9b::cb00:7108');
  });

  it('knows no address in what is not one', () => {
    for (const raw of ['unknown', '_hidden', '', '1.2.3', '203.0.113.7, 1.1.1.1', 'example.com'])
      assert.equal(parseAddress(raw), undefined, raw);
  });
});

describe('addressKey', () => {
  it('keeps an IPv4 address whole', () => {
    assert.equal(addressKey('203.0.113.7', 56), '203.0.113.7');
  });

  it('keys an IPv6 address by its prefix', () => {
    assert.equal(addressKey('2001:db8:ab:cd01::1', 56), '2001:db8:ab:cd00::/56');
    assert.equal(addressKey('2001:db8:ab:cdff:1234:5678:9abc:def0', 56), '2001:db8:ab:cd00::/56');
    assert.equal(addressKey('2001:db8:ab:cdff:1234:5678:9abc:def0', 64), '2001:db8:ab:cdff::/64');
    assert.equal(addressKey('2001:db8:ab:cdff:1234:5678:9abc:def0', 128), '2001:db8:ab:cdff:1234:5678:9abc:def0/128');
    assert.equal(addressKey('ffff::1', 1), '8000::/1');
    assert.equal(addressKey('::1', 56), '::/56');
    assert.equal(addressKey('2001:db8::ffff:1.2.3.4', 128), '2001:db8:0:0:0:ffff:102:304/128');
  });
});

describe('findClientAddress', () => {
  const trusting = (trustedProxies: number, proxyHeader: 'x-forwarded-for' | 'forwarded' = 'x-forwarded-for') =>
    clientAddressConfig({ trustedProxies, proxyHeader });

  it('uses the socket alone when no proxy is trusted, and flags a proxy header', () => {
    assert.deepEqual(findClientAddress(trusting(0), '::ffff:127.0.0.1', undefined), { address: '127.0.0.1' });
    assert.deepEqual(findClientAddress(trusting(0), '127.0.0.1', '198.51.100.1'), {
      address: '127.0.0.1',
      problem: 'proxy-header-ignored',
    });
  });

  it('takes the address as many hops from the right as there are trusted proxies', () => {
    const chain = '198.51.100.1, 203.0.113.9, 192.0.2.1';
    assert.deepEqual(findClientAddress(trusting(1), '10.0.0.2', chain), { address: '192.0.2.1' });
    assert.deepEqual(findClientAddress(trusting(2), '10.0.0.2', chain), { address: '203.0.113.9' });
    assert.deepEqual(findClientAddress(trusting(3), '10.0.0.2', chain), { address: '198.51.100.1' });
    assert.deepEqual(findClientAddress(trusting(4), '10.0.0.2', chain), {
      address: '198.51.100.1',
      problem: 'proxy-chain-short',
    });
    assert.deepEqual(findClientAddress(trusting(1), '10.0.0.2', undefined), {
      address: '10.0.0.2',
      problem: 'proxy-chain-short',
    });
  });

  it('counts every X-Forwarded-For element as a hop, empty ones too', () => {
    assert.deepEqual(findClientAddress(trusting(1), '10.0.0.2', '192.0.2.1,'), { address: undefined });
    assert.deepEqual(findClientAddress(trusting(2), '10.0.0.2', ',192.0.2.1'), { address: undefined });
    assert.deepEqual(findClientAddress(trusting(2), '10.0.0.2', '198.51.100.1,,192.0.2.1'), { address: undefined });
    assert.deepEqual(findClientAddress(trusting(3), '10.0.0.2', '198.51.100.1,,192.0.2.1'), {
      address: '198.51.100.1',
    });
    assert.deepEqual(findClientAddress(trusting(2), '10.0.0.2', ','), { address: undefined });
    assert.deepEqual(findClientAddress(trusting(3), '10.0.0.2', ','), {
      address: undefined,
      problem: 'proxy-chain-short',
    });
    assert.deepEqual(findClientAddress(trusting(2), '10.0.0.2', ' 198.51.100.1 ,192.0.2.1'), {
      address: '198.51.100.1',
    });
    assert.deepEqual(findClientAddress(trusting(1), '10.0.0.2', ''), { address: undefined });
  });

  it('reads the for= of each Forwarded element', () => {
    const forwarded = 'for=198.51.100.1;proto=http, by=10.0.0.1, for="[2001:db8:cafe::17]:4711"';
    assert.deepEqual(findClientAddress(trusting(1, 'forwarded'), '10.0.0.2', forwarded), {
      address: '2001:db8:cafe::17',
    });
    assert.deepEqual(findClientAddress(trusting(2, 'forwarded'), '10.0.0.2', forwarded), { address: undefined });
    assert.deepEqual(findClientAddress(trusting(3, 'forwarded'), '10.0.0.2', forwarded), { address: '198.51.100.1' });
  });

  it('reads quoted Forwarded values whole, escapes and separators included', () => {
    const forwarded = 'for=198.51.100.1;ext="a\\"b,c;d", For="[2001:db8::9]:80";by="x,y"';
    assert.deepEqual(findClientAddress(trusting(1, 'forwarded'), '10.0.0.2', forwarded), { address: '2001:db8::9' });
    assert.deepEqual(findClientAddress(trusting(2, 'forwarded'), '10.0.0.2', forwarded), { address: '198.51.100.1' });
  });

  it('reads a Forwarded header from the right only as far as the trusted hops, however long a client padded it', () => {
    const tail = 'for=198.51.100.1;ext="a\\"b,c", For="[2001:db8::9]:80";by="x,y"';
    const padded = `${'for=203.0.113.66;x=","'.repeat(8_192)}${','.repeat(65_536)}${tail}`;
    // Counts the characters the parser reads: linear work in the hops, not in the header's length.
    let reads = 0;
    const watched = new Proxy(new String(padded), {
      get(target, name) {
        if (typeof name === 'string' && /^\d+$/.test(name)) reads++;
        const value: unknown = Reflect.get(target, name);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    }) as unknown as string;
    assert.deepEqual(findClientAddress(trusting(2, 'forwarded'), '10.0.0.2', watched), {
      address: '198.51.100.1',
    });
    assert.ok(reads <= 2 * tail.length, `${reads} characters read of ${padded.length}`);
    assert.deepEqual(findClientAddress(trusting(2, 'forwarded'), '10.0.0.2', padded), { address: '198.51.100.1' });
    assert.deepEqual(findClientAddress(trusting(3, 'forwarded'), '10.0.0.2', padded), { address: undefined });
  });

  it('knows no address when the trusted hop wrote none', () => {
    assert.deepEqual(findClientAddress(trusting(1), '10.0.0.2', '198.51.100.1, unknown'), { address: undefined });
  });
});

describe('clientAddressConfig', () => {
  it('defaults to no proxy, X-Forwarded-For and /56', () => {
    assert.deepEqual(clientAddressConfig({}), { trustedProxies: 0, proxyHeader: 'x-forwarded-for', ipv6Subnet: 56 });
  });

  it("defers to the framework's proxy setting only where the adapter has one", () => {
    assert.throws(
      () => clientAddressConfig({ trustedProxies: 'framework' }),
      (error: unknown) => error instanceof InvalidOptionError && error.option === 'trustedProxies',
    );
    const deferring = clientAddressConfig({ trustedProxies: 'framework' }, "Express's `trust proxy`");
    assert.deepEqual(findClientAddress(deferring, '10.0.0.2', undefined, '::ffff:203.0.113.9'), {
      address: '203.0.113.9',
    });
    assert.deepEqual(findClientAddress(deferring, '10.0.0.2', undefined, undefined), { address: undefined });
    assert.throws(
      () => clientAddressConfig({ trustedProxies: true as never }, "Express's `trust proxy`"),
      (error: unknown) =>
        error instanceof InvalidOptionError &&
        error.message.includes('or "framework" to defer to Express\'s `trust proxy`'),
    );
  });

  it('refuses to trust every proxy, and other bad values, naming the option', () => {
    const bad: [string, Record<string, unknown>][] = [
      ['trustedProxies', { trustedProxies: true }],
      ['trustedProxies', { trustedProxies: Infinity }],
      ['trustedProxies', { trustedProxies: -1 }],
      ['trustedProxies', { trustedProxies: 1.5 }],
      ['proxyHeader', { proxyHeader: 'x-real-ip' }],
      ['ipv6Subnet', { ipv6Subnet: 0 }],
      ['ipv6Subnet', { ipv6Subnet: 129 }],
    ];
    for (const [option, options] of bad) {
      assert.throws(
        () => clientAddressConfig(options),
        (error: unknown) => error instanceof InvalidOptionError && error.option === option,
        JSON.stringify(options),
      );
    }
  });
});

// A fixed seed, so a failure replays the same way.
const RUNS = { seed: 16, numRuns: 5000 };

/** What parseAddress made of a bare address when it used node:net's parser: the oracle it must still match. */
function nodeParse(address: string): string | undefined {
  if (isIPv4(address)) return address;
  if (!isIPv6(address)) return undefined;
  const canonical = new SocketAddress({ address, family: 'ipv6' }).address;
  const mapped = canonical.slice('::ffff:'.length);
  return canonical.startsWith('::ffff:') && isIPv4(mapped) ? mapped : canonical;
}

// Words biased to the values that decide a spelling: zero runs, the IPv4-mapped 0xffff, small numbers.
const word = fc.oneof(
  fc.constant(0),
  fc.constant(0),
  fc.constant(0xffff),
  fc.integer({ min: 1, max: 0x10 }),
  fc.integer({ min: 0, max: 0xffff }),
);

/** One of the many spellings of eight words: any zero run as `::`, leading zeros, upper case, a dotted tail. */
const spelled = fc
  .record({
    words: fc.array(word, { minLength: 8, maxLength: 8 }),
    runAt: fc.integer({ min: 0, max: 8 }),
    runLength: fc.integer({ min: 0, max: 8 }),
    padded: fc.boolean(),
    upper: fc.boolean(),
    dottedTail: fc.boolean(),
  })
  .map(({ words, runAt, runLength, padded, upper, dottedTail }) => {
    const groups = words.map((w) => (padded ? w.toString(16).padStart(4, '0') : w.toString(16)));
    if (dottedTail) groups.splice(6, 2, `${words[6]! >> 8}.${words[6]! & 255}.${words[7]! >> 8}.${words[7]! & 255}`);
    const end = Math.min(runAt + runLength, groups.length);
    const zeroRun =
      runLength > 0 && end > runAt && words.slice(runAt, end).every((w) => w === 0) && !(dottedTail && end > 6);
    const text = zeroRun ? `${groups.slice(0, runAt).join(':')}::${groups.slice(end).join(':')}` : groups.join(':');
    return upper ? text.toUpperCase() : text;
  });

describe('parseAddress against node:net', () => {
  it('writes every spelling of an IPv6 address as node:net does', () => {
    fc.assert(
      fc.property(spelled, (address) => assert.equal(parseAddress(address), nodeParse(address), address)),
      RUNS,
    );
  });

  it('tells addresses from what is not one as node:net does', () => {
    const nearMisses = [
      '1:2:3:4:5:6:7::8',
      '1:2:3:4:5:6:7:8::',
      '::1:2:3:4:5:6:7:8',
      '1:2:3:4:5:6:7::',
      '::2:3:4:5:6:7:8',
      '1:2:3:4:5:6::1.2.3.4',
      '1::2:3:4:5:6:1.2.3.4',
      '1:2:3:4:5:6:1.2.3.4',
    ];
    for (const address of [
      ...nearMisses,
      ':::1',
      '1:::2',
      '::1.2.3.04',
      '::1.2.3.256',
      '1.2.3.4::',
      '::ffff:1.2.3',
      '12345::',
      ':1::',
      '1::2::3',
    ]) {
      assert.equal(parseAddress(address), nodeParse(address), address);
    }
    // (without a dotted quad and a port, which parseAddress reads as IPv4 with its port)
    const text = fc
      .string({ unit: fc.constantFrom(...'0123456789abcdefABCDEFg:.:::'), maxLength: 45 })
      .filter((t) => !/^[\d.]+:\d+$/.test(t.trim()));
    fc.assert(
      fc.property(text, (address) => assert.equal(parseAddress(address), nodeParse(address.trim()), address)),
      RUNS,
    );
  });
});
