import assert from 'node:assert/strict';
import { isIPv4, isIPv6, SocketAddress } from 'node:net';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parseAddress } from '../../src/http/client-address.js';

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
