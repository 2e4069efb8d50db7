import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  concurrency,
  createLimiter,
  fixedWindow,
  gcra,
  memoryStore,
  rateLimitHeaders,
  slidingLog,
  slidingWindow,
  tokenBucket,
  type Policy,
} from '../../src/index.js';
import { numbers } from '../support/algorithms.js';

/** A limiter on the memory store with a clock the test moves by hand. */
function withClock(policy: Policy, start = 1_000_000) {
  const clock = { now: start };
  const limiter = createLimiter({ store: memoryStore({ now: () => clock.now }), policy });
  return { clock, limiter };
}

describe('fixedWindow twin', () => {
  it('aligns windows to the clock and reports the exact time to the window end', async () => {
    const { clock, limiter } = withClock(fixedWindow({ limit: 2, window: '1s' }), 10_250);
    assert.deepEqual(numbers(await limiter.limit('k')), {
      allowed: true,
      limit: 2,
      remaining: 1,
      resetAfterMs: 750,
      retryAfterMs: 0,
    });
    clock.now = 10_900;
    assert.equal((await limiter.limit('k')).remaining, 0);
    assert.deepEqual(numbers(await limiter.limit('k')), {
      allowed: false,
      limit: 2,
      remaining: 0,
      resetAfterMs: 100,
      retryAfterMs: 100,
    });
    clock.now = 10_999;
    assert.equal((await limiter.limit('k')).allowed, false);
    clock.now = 11_000;
    assert.deepEqual(numbers(await limiter.limit('k')), {
      allowed: true,
      limit: 2,
      remaining: 1,
      resetAfterMs: 1000,
      retryAfterMs: 0,
    });
  });

  it('does not count denied requests', async () => {
    const { limiter } = withClock(fixedWindow({ limit: 3, window: '1m' }));
    await limiter.limit('k', { cost: 2 });
    assert.equal((await limiter.limit('k', { cost: 2 })).allowed, false);
    assert.equal((await limiter.limit('k', { cost: 1 })).allowed, true);
  });

  it('admits 10 of 10 around an edge', async () => {
    const { clock, limiter } = withClock(fixedWindow({ limit: 5, window: '1s' }), 4_900);
    let admitted = 0;
    for (let i = 0; i < 5; i++) admitted += (await limiter.limit('k')).allowed ? 1 : 0;
    clock.now = 5_100;
    for (let i = 0; i < 5; i++) admitted += (await limiter.limit('k')).allowed ? 1 : 0;
    assert.equal(admitted, 10);
  });
});

describe('slidingLog twin', () => {
  it('admits 5 of 10 around an edge and says when the oldest leaves', async () => {
    const { clock, limiter } = withClock(slidingLog({ limit: 5, window: '1s' }), 4_900);
    for (let i = 0; i < 5; i++) assert.equal((await limiter.limit('k')).allowed, true);
    clock.now = 5_100;
    const denied = await limiter.limit('k');
    assert.deepEqual(numbers(denied), { allowed: false, limit: 5, remaining: 0, resetAfterMs: 800, retryAfterMs: 800 });
    clock.now = 5_899;
    assert.equal((await limiter.limit('k')).allowed, false);
    clock.now = 5_900;
    assert.equal((await limiter.limit('k')).allowed, true);
  });

  it('refunds nothing once the newest entry has left the window, in the ms the log still lives', async () => {
    const { clock, limiter } = withClock(slidingLog({ limit: 5, window: '1s' }), 0);
    await limiter.limit('k', { cost: 2 });
    // The log expires at 1,001 (its newest entry leaves the window at 1,000, plus a ms).
    clock.now = 1_000;
    assert.equal(await limiter.refund('k'), false);
    assert.equal((await limiter.peek('k')).remaining, 5);
  });

  it('waits for as many old entries as the cost needs', async () => {
    const { clock, limiter } = withClock(slidingLog({ limit: 3, window: 1000 }), 0);
    await limiter.limit('k'); // at 0
    clock.now = 100;
    await limiter.limit('k'); // at 100
    clock.now = 200;
    await limiter.limit('k'); // at 200
    clock.now = 300;
    // cost 2 needs two entries gone: the one from 100 leaves at 1100
    assert.equal((await limiter.limit('k', { cost: 2 })).retryAfterMs, 800);
    clock.now = 1100;
    assert.equal((await limiter.limit('k', { cost: 2 })).allowed, true);
  });

  it('keeps entries of one millisecond apart and counts each', async () => {
    const { limiter } = withClock(slidingLog({ limit: 1000, window: '1m' }));
    for (let i = 0; i < 999; i++) await limiter.limit('k');
    assert.deepEqual(numbers(await limiter.limit('k')), {
      allowed: true,
      limit: 1000,
      remaining: 0,
      resetAfterMs: 60_000,
      retryAfterMs: 0,
    });
    assert.equal((await limiter.limit('k')).allowed, false);
  });
});

describe('tokenBucket twin', () => {
  it('refills continuously, keeps fractions, and reports exact waits', async () => {
    const { clock, limiter } = withClock(tokenBucket({ capacity: 4, refillPerSecond: 2 }), 0);
    assert.deepEqual(numbers(await limiter.limit('k', { cost: 4 })), {
      allowed: true,
      limit: 4,
      remaining: 0,
      resetAfterMs: 2000,
      retryAfterMs: 0,
    });
    clock.now = 250; // 0.5 tokens
    assert.deepEqual(numbers(await limiter.limit('k')), {
      allowed: false,
      limit: 4,
      remaining: 0,
      resetAfterMs: 1750,
      retryAfterMs: 250,
    });
    clock.now = 499;
    assert.equal((await limiter.limit('k')).allowed, false);
    clock.now = 500; // exactly 1 token
    assert.equal((await limiter.limit('k')).allowed, true);
    clock.now = 1750; // 2.5 tokens: remaining is a whole number
    assert.deepEqual(numbers(await limiter.peek('k')), {
      allowed: true,
      limit: 4,
      remaining: 2,
      resetAfterMs: 750,
      retryAfterMs: 0,
    });
  });

  it('never holds more than its capacity', async () => {
    const { clock, limiter } = withClock(tokenBucket({ capacity: 3, refillPerSecond: 1 }), 0);
    await limiter.limit('k');
    clock.now = 3_600_000;
    assert.equal((await limiter.limit('k')).remaining, 2);
  });
});

describe('gcra twin', () => {
  it('admits the burst at once, then one request per interval, exactly', async () => {
    const { clock, limiter } = withClock(gcra({ limit: 5, period: '1s' }), 0);
    for (let i = 0; i < 5; i++) assert.equal((await limiter.limit('k')).allowed, true);
    assert.deepEqual(numbers(await limiter.limit('k')), {
      allowed: false,
      limit: 5,
      remaining: 0,
      resetAfterMs: 1000,
      retryAfterMs: 200,
    });
    clock.now = 199; // the demo's bursts 200 ms apart: one ms short, nothing
    assert.equal((await limiter.limit('k')).allowed, false);
    clock.now = 200; // on the dot: the one request the interval earned
    assert.equal((await limiter.limit('k')).allowed, true);
    assert.equal((await limiter.limit('k')).allowed, false);
  });

  it('keeps a burst apart from the rate, and cost is all or nothing', async () => {
    const { clock, limiter } = withClock(gcra({ limit: 10, period: '1s', burst: 2 }), 0);
    assert.deepEqual(numbers(await limiter.limit('k', { cost: 2 })), {
      allowed: true,
      limit: 2,
      remaining: 0,
      resetAfterMs: 200,
      retryAfterMs: 0,
    });
    clock.now = 150;
    // one interval (100 ms) has passed: one request fits now, two only at 200
    assert.deepEqual(numbers(await limiter.limit('k', { cost: 2 })), {
      allowed: false,
      limit: 2,
      remaining: 1,
      resetAfterMs: 50,
      retryAfterMs: 50,
    });
    clock.now = 199;
    assert.equal((await limiter.limit('k', { cost: 2 })).allowed, false);
    clock.now = 200;
    assert.equal((await limiter.limit('k', { cost: 2 })).allowed, true);
  });
});

describe('gcra limit: the most admitted at once, its burst', () => {
  it('reports the burst as the limit, and the time to earn it as the window, so the headers keep the rate', async () => {
    for (const [burst, windowMs, policyHeader] of [
      [3, 600, '"3-burst-5-per-1s";q=3;w=1'],
      [10, 2_000, '"10-burst-5-per-1s";q=10;w=2'],
    ] as const) {
      const { limiter } = withClock(gcra({ limit: 5, period: '1s', burst }), 0);
      assert.deepEqual([limiter.policy.limit, limiter.policy.windowMs], [burst, windowMs]);
      const fresh = await limiter.limit('k');
      assert.deepEqual([fresh.limit, fresh.remaining], [burst, burst - 1]);
      assert.ok(fresh.remaining <= fresh.limit);
      assert.equal(rateLimitHeaders(fresh)['RateLimit-Policy'], policyHeader);
    }
    // Without a burst, the limit and the period, as given.
    const plain = gcra({ limit: 5, period: '1s' });
    assert.deepEqual([plain.limit, plain.windowMs], [5, 1_000]);
  });
});

describe('slidingWindow twin', () => {
  it('weights the previous window by its overlap and says exactly when to retry', async () => {
    const { clock, limiter } = withClock(slidingWindow({ limit: 10, window: '1s' }), 0);
    await limiter.limit('k', { cost: 10 }); // all in window [0, 1000)
    clock.now = 1_250; // previous 10 weighted 0.75: 7.5 in the window
    const denied = await limiter.limit('k', { cost: 3 });
    // 10 * (1000 - e) / 1000 + 3 <= 10 once e >= 300: at 1300
    assert.deepEqual(numbers(denied), { allowed: false, limit: 10, remaining: 2, resetAfterMs: 750, retryAfterMs: 50 });
    clock.now = 1_299;
    assert.equal((await limiter.limit('k', { cost: 3 })).allowed, false);
    clock.now = 1_300;
    assert.equal((await limiter.limit('k', { cost: 3 })).allowed, true);
  });

  it('admits 5 of 10 around an edge', async () => {
    const { clock, limiter } = withClock(slidingWindow({ limit: 5, window: '1s' }), 4_900);
    let admitted = 0;
    for (let i = 0; i < 5; i++) admitted += (await limiter.limit('k')).allowed ? 1 : 0;
    clock.now = 5_100;
    for (let i = 0; i < 5; i++) admitted += (await limiter.limit('k')).allowed ? 1 : 0;
    assert.equal(admitted, 5);
  });
});

describe('concurrency twin', () => {
  it('frees a slot when a lease expires, and says when', async () => {
    const { clock, limiter } = withClock(concurrency({ limit: 2, leaseMs: 1000 }), 0);
    await limiter.acquire('k');
    clock.now = 400;
    await limiter.acquire('k');
    const full = await limiter.acquire('k');
    assert.deepEqual(numbers(full), { allowed: false, limit: 2, remaining: 0, resetAfterMs: 1000, retryAfterMs: 600 });
    clock.now = 1000;
    assert.equal((await limiter.acquire('k')).allowed, true);
  });
});

describe('memoryStore', () => {
  it('evicts the least recently used key past maxKeys', async () => {
    const store = memoryStore({ maxKeys: 3 });
    const limiter = createLimiter({ store, policy: fixedWindow({ limit: 5, window: '1h' }) });
    for (const key of ['a', 'b', 'c']) await limiter.limit(key);
    await limiter.limit('a'); // a is now the most recently used
    await limiter.limit('d'); // evicts b
    assert.equal(store.size, 3);
    assert.equal((await limiter.peek('a')).remaining, 3);
    assert.equal((await limiter.peek('b')).remaining, 5);
    assert.equal((await limiter.peek('c')).remaining, 4);
  });

  it("keeps a client's other state when its first part expires and is swept", async () => {
    const clock = { now: 0 };
    const store = memoryStore({ now: () => clock.now });
    const limiter = createLimiter({ store, policy: fixedWindow({ limit: 5, window: '1h' }) });
    await limiter.block('k', 1000); // the block is the client's first part
    clock.now = 2000;
    // The counter is new state: it sweeps, and the sweep finds this client's expired block.
    await limiter.limit('k');
    await limiter.limit('k');
    assert.equal(store.size, 1, 'the counter alone');
    assert.equal((await limiter.peek('k')).remaining, 3);
    await limiter.block('k', 1000);
    assert.equal((await limiter.limit('k')).blockedForMs, 1000);
  });

  it("sweeps a client's expired later part and keeps its first", async () => {
    const clock = { now: 0 };
    const store = memoryStore({ now: () => clock.now });
    const limiter = createLimiter({ store, policy: fixedWindow({ limit: 5, window: '1h' }) });
    await limiter.limit('k'); // the counter is the client's first part
    await limiter.block('k', 1000); // the block, its second
    assert.equal(store.size, 2);
    clock.now = 2000;
    await limiter.limit('other'); // new state sweeps: the expired block goes
    assert.equal(store.size, 2, 'the counter and the new client');
    assert.equal((await limiter.peek('k')).remaining, 4);
  });

  it('keeps limiting a client whose own state outnumbers maxKeys', async () => {
    const store = memoryStore({ maxKeys: 1 });
    const limiter = createLimiter({
      store,
      policy: [fixedWindow({ limit: 1, window: '1h' }), fixedWindow({ limit: 1, window: '1h', name: 'b' })],
    });
    const allowed = [];
    for (let i = 0; i < 3; i++) allowed.push((await limiter.limit('k')).allowed);
    assert.deepEqual(allowed, [true, false, false]);
    assert.equal(store.size, 2, "the client's two counters, past maxKeys rather than forgotten");
    await limiter.limit('other');
    assert.equal((await limiter.peek('other')).remaining, 0, 'the newest client kept');
    assert.equal((await limiter.peek('k')).remaining, 1, 'the older one evicted to make room');
  });

  it('asks a store that wraps a memory store through the wrapper', async () => {
    const inner = memoryStore();
    let calls = 0;
    const wrapped = { ...inner, run: (...args: Parameters<typeof inner.run>) => (calls++, inner.run(...args)) };
    const limiter = createLimiter({ store: wrapped, policy: fixedWindow({ limit: 5, window: '1h' }) });
    await limiter.limit('k');
    await limiter.peek('k');
    assert.equal(calls, 2);
    const failing = { ...inner, run: () => Promise.reject(new Error('down')) };
    const denying = createLimiter({
      store: failing,
      policy: fixedWindow({ limit: 5, window: '1h' }),
      onStoreError: 'deny',
      onOutage: () => undefined,
    });
    const decision = await denying.limit('k');
    assert.equal(decision.allowed, false);
    assert.equal(decision.reason, 'store-error');
  });

  it('sweeps expired keys as new ones arrive, with no timers', async () => {
    const clock = { now: 0 };
    const store = memoryStore({ now: () => clock.now });
    const limiter = createLimiter({ store, policy: fixedWindow({ limit: 5, window: '1s' }) });
    for (let i = 0; i < 1000; i++) await limiter.limit(`old:${i}`);
    assert.equal(store.size, 1000);
    clock.now = 5_000;
    // Each new key sweeps two others; calls on state already held sweep nothing.
    await limiter.limit('new:0');
    assert.equal(store.size, 1000 + 1 - 2);
    for (let i = 0; i < 10; i++) await limiter.limit('new:0');
    assert.equal(store.size, 999);
    for (let i = 1; i < 600; i++) await limiter.limit(`new:${i}`);
    assert.equal(store.size, 600);
  });
});
