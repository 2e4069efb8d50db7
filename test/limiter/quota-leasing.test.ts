import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { rateLimit } from '../../src/adapters/node.js';
import type { RedisServer } from '../../src/cli/redis-server.js';
import {
  concurrency,
  createLimiter,
  fixedWindow,
  gcra,
  InvalidOptionError,
  memoryStore,
  observe,
  redisStore,
  slidingLog,
  WrongMethodError,
  type LimiterOptions,
  type MeterLike,
  type Store,
} from '../../src/index.js';
import { algorithms } from '../support/algorithms.js';
import { uniquePrefix } from '../support/redis.js';
import { startTestServer } from '../support/servers.js';
import { switchableStore } from '../support/switchable-store.js';

const tenPerHour = fixedWindow({ limit: 10, window: '1h' });

/** A limiter with a lease of 4 units on a memory store whose clock stands still (no window ends). */
function leased(more: Partial<LimiterOptions> = {}) {
  const store = memoryStore({ now: () => 1_000_000 });
  const options: LimiterOptions = { store, policy: tenPerHour, lease: { units: 4, ms: '1h' } };
  return {
    store,
    limiter: createLimiter({ ...options, ...more }),
    plain: createLimiter({ store, policy: tenPerHour }),
  };
}

/** A limiter with a lease of `units`, 'deny' and a 30 ms timeout, on a store that can be made to hang. */
function hangableLeased(units: number) {
  const { store, control } = switchableStore();
  const limiter = createLimiter({
    store,
    policy: tenPerHour,
    onStoreError: 'deny',
    timeout: 30,
    lease: { units, ms: '1h' },
  });
  return { limiter, control };
}

/** A meter that sums what each counter is given. */
function summingMeter() {
  const sums = new Map<string, number>();
  const meter: MeterLike = {
    createCounter: (name) => ({ add: (value) => void sums.set(name, (sums.get(name) ?? 0) + value) }),
    createHistogram: () => ({ record: () => {} }),
  };
  return { meter, sums };
}

describe('quota leases: options', () => {
  const store = memoryStore();
  const refused = (options: Partial<LimiterOptions>, pattern: RegExp) =>
    assert.throws(
      () => createLimiter({ store, policy: tenPerHour, lease: { units: 4, ms: '1s' }, ...options }),
      (error) => error instanceof InvalidOptionError && pattern.test(error.message),
    );

  it('refuses slidingLog and concurrency, saying why', () => {
    refused({ policy: slidingLog({ limit: 10, window: '1h' }) }, /leave the log before the request it admitted/);
    refused({ policy: concurrency({ limit: 10, leaseMs: '1m' }) }, /a slot is held until released/);
  });

  it('refuses several policies, a penalty box, units past the limit, and unknown or missing lease options', () => {
    refused({ policy: [tenPerHour, gcra({ limit: 5, period: '1s' })] }, /a lease on a limiter of one policy/);
    refused({ penalty: { after: 3, block: '1m' } }, /option "penalty" must be left out on a limiter with a lease/);
    refused({ lease: { units: 11, ms: '1s' } }, /"lease.units" must be a whole number from 1 to 10; got 11/);
    refused({ lease: { units: 4, ms: '1s', size: 4 } as never }, /lease has no option "size"/);
    refused({ lease: { units: 4 } as never }, /"lease.ms" must be a duration/);
  });

  it('refuses block(), which could not stop the leases other processes hold', async () => {
    const { limiter } = leased();
    await assert.rejects(limiter.block('k', '1m'), WrongMethodError);
  });
});

describe('quota leases: decisions', () => {
  it('admits exactly the limit, with remaining counting the store and the lease, and denies as the store does', async () => {
    const { limiter, plain } = leased();
    const decisions = [];
    for (let i = 0; i < 12; i++) decisions.push(await limiter.limit('k'));
    assert.deepEqual(
      decisions.map((d) => [d.allowed, d.remaining]),
      [...Array.from({ length: 10 }, (_, i) => [true, 9 - i]), [false, 0], [false, 0]],
    );
    const { retryAfterMs, resetAfterMs } = await plain.limit('k');
    assert.deepEqual([decisions[11]?.retryAfterMs, decisions[11]?.resetAfterMs], [retryAfterMs, resetAfterMs]);
  });

  it('peek counts what the lease holds; close() gives it back to the store, and observe() counts it all', async () => {
    const { limiter, plain } = leased();
    const { meter, sums } = summingMeter();
    const observed = observe(limiter, { meter });
    for (let i = 0; i < 3; i++) assert.equal((await observed.limit('k')).allowed, true);
    // The store counted the lease's 4 units; the lease holds 1 of them.
    assert.equal((await plain.peek('k')).remaining, 6);
    assert.equal((await observed.peek('k')).remaining, 7);
    await observed.close();
    assert.equal((await plain.peek('k')).remaining, 7);
    assert.deepEqual(Object.fromEntries(sums), {
      'sluice.requests.allowed': 3,
      'sluice.leases.taken': 1,
      'sluice.leases.units_returned': 1,
    });
    // After close() every call asks the store: nothing more is leased.
    await observed.limit('k');
    assert.equal((await plain.peek('k')).remaining, 6);
  });

  it('keeps meaning in shadow mode: every request admitted, the ones past the limit marked', async () => {
    const { limiter } = leased({ shadow: true, lease: { units: 3, ms: '1h' } });
    const decisions = [];
    for (let i = 0; i < 12; i++) decisions.push(await limiter.limit('k'));
    assert.ok(decisions.every((d) => d.allowed && d.shadow === true));
    assert.deepEqual(
      decisions.map((d) => d.shadowDenied),
      Array.from({ length: 12 }, (_, i) => i >= 10),
    );
  });

  it('decides a cost past the lease, and another policy, at the store', async () => {
    const { limiter, plain } = leased();
    assert.equal((await limiter.limit('k', { cost: 5 })).remaining, 5);
    assert.equal((await limiter.limit('k', { policy: fixedWindow({ limit: 20, window: '1h' }) })).remaining, 14);
    assert.equal((await plain.peek('k')).remaining, 4);
  });
});

describe('quota leases: middleware', () => {
  it('limits HTTP requests through the leased limiter, as without a lease', async () => {
    const { limiter } = leased({ policy: fixedWindow({ limit: 3, window: '1h' }), lease: { units: 2, ms: '1h' } });
    const limit = rateLimit({ limiter });
    const server = createServer((req, res) => void limit(req, res).then((allowed) => allowed && res.end('hello')));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const address = server.address();
    const url = `http://127.0.0.1:${typeof address === 'object' ? address?.port : address}/`;
    try {
      const answers = [];
      for (let i = 0; i < 4; i++) {
        const response = await fetch(url);
        answers.push([response.status, response.headers.get('retry-after') !== null]);
        await response.arrayBuffer();
      }
      assert.deepEqual(answers, [
        [200, false],
        [200, false],
        [200, false],
        [429, true],
      ]);
    } finally {
      server.close();
      await limiter.close();
    }
  });
});

describe('quota leases: store failures', () => {
  it('a held lease admits through an outage; once dry, the failure policy decides', async () => {
    const { store, control } = switchableStore();
    const limiter = createLimiter({ store, policy: tenPerHour, onStoreError: 'deny', lease: { units: 5, ms: '1h' } });
    assert.equal((await limiter.limit('k')).reason, undefined);
    control.mode = 'fail';
    for (let i = 0; i < 4; i++)
      assert.deepEqual(await limiter.limit('k').then((d) => [d.allowed, d.reason]), [true, undefined]);
    const dry = await limiter.limit('k');
    assert.deepEqual([dry.allowed, dry.reason], [false, 'store-error']);
  });

  it('requests that wait for a take the store did not answer in time get the failure policy, without asking again', async () => {
    const { limiter, control } = hangableLeased(5);
    control.mode = 'hang';
    const decisions = await Promise.all([limiter.limit('k'), limiter.limit('k'), limiter.limit('k', { cost: 2 })]);
    assert.deepEqual(
      decisions.map((d) => [d.allowed, d.reason]),
      [
        [false, 'timeout'],
        [false, 'timeout'],
        [false, 'timeout'],
      ],
    );
    // The take alone was sent: each waiter asking the store itself would have waited a timeout more.
    assert.equal(control.pending.length, 1);
  });

  it('a request that waited for a take does not ask again when the lease it holds cannot pay its cost', async () => {
    const { limiter, control } = hangableLeased(3);
    // Leaves 1 unit in the lease: too few for a cost of 2.
    assert.equal((await limiter.limit('k', { cost: 2 })).allowed, true);
    control.mode = 'hang';
    const decisions = await Promise.all([limiter.limit('k', { cost: 2 }), limiter.limit('k', { cost: 2 })]);
    assert.deepEqual(
      decisions.map((d) => [d.allowed, d.reason]),
      [
        [false, 'timeout'],
        [false, 'timeout'],
      ],
    );
    // The second waited for the first's take, and the old lease it still held sent it to no second wait.
    assert.equal(control.pending.length, 1);
  });

  it('never past its end: a lease whose time is over admits nothing in an outage', async () => {
    const { store, control } = switchableStore();
    const limiter = createLimiter({ store, policy: tenPerHour, onStoreError: 'deny', lease: { units: 5, ms: 20 } });
    await limiter.limit('k');
    control.mode = 'fail';
    await sleep(40);
    const late = await limiter.limit('k');
    assert.deepEqual([late.allowed, late.reason], [false, 'store-error']);
  });

  it('asks a fallback limiter at the request’s own cost, not the lease’s', async () => {
    const { store, control } = switchableStore();
    control.mode = 'fail';
    const fallback = createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 2, window: '1h' }) });
    const limiter = createLimiter({ store, policy: tenPerHour, onStoreError: fallback, lease: { units: 4, ms: '1h' } });
    const decisions = [await limiter.limit('k'), await limiter.limit('k'), await limiter.limit('k')];
    assert.deepEqual(
      decisions.map((d) => [d.allowed, d.reason]),
      [
        [true, 'store-error'],
        [true, 'store-error'],
        [false, 'store-error'],
      ],
    );
  });
});

describe('quota leases on redis-server', () => {
  let server: RedisServer;
  let redis: Redis;
  before(async () => {
    server = await startTestServer();
    redis = new Redis(server.url);
  });
  after(async () => {
    await redis.quit();
    await server.stop();
  });

  it('counts the lease in Redis at once, and gives back what was not used to the window it came from', async () => {
    const prefix = uniquePrefix();
    const store = redisStore(redis);
    const limiter = createLimiter({ store, prefix, policy: tenPerHour, lease: { units: 4, ms: '1h' } });
    const plain = createLimiter({ store, prefix, policy: tenPerHour });
    await limiter.limit('k');
    assert.equal((await plain.peek('k')).remaining, 6);
    await limiter.close();
    assert.equal((await plain.peek('k')).remaining, 9);
    const [key = ''] = limiter.storageKeys('k').policies;
    assert.ok((await redis.pttl(key)) > 0);
  });

  for (const algorithm of algorithms.filter((a) => a.name !== 'slidingLog')) {
    it(`${algorithm.name}: a take that does not fit takes what does, in one store call`, async () => {
      const prefix = uniquePrefix();
      const store = redisStore(redis);
      let calls = 0;
      const counted: Store = { run: (...args) => (calls++, store.run(...args)) };
      // 10 per hour: nothing refills while the test runs.
      const hourly = algorithm.policy(10, 3_600_000);
      const limiter = createLimiter({ store: counted, prefix, policy: hourly, lease: { units: 4, ms: '1h' } });
      const plain = createLimiter({ store, prefix, policy: hourly });
      assert.equal((await plain.limit('k', { cost: 8 })).allowed, true);
      // The lease asks 4, and takes the 2 that fit: one for this request, one left in the lease.
      assert.deepEqual(await limiter.limit('k').then((d) => [d.allowed, d.remaining]), [true, 1]);
      assert.equal(calls, 1);
      assert.equal((await plain.peek('k')).remaining, 0);
      assert.equal((await limiter.limit('k')).allowed, true);
      assert.equal(calls, 1);
      const denied = await limiter.limit('k');
      assert.equal(denied.allowed, false);
      assert.ok(denied.retryAfterMs > 0);
      assert.equal(calls, 2);
      await limiter.close();
    });
  }
});
