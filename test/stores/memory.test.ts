import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidOptionError, createLimiter, fixedWindow, memoryStore, slidingLog } from '../../src/index.js';
import { callKeys } from '../../src/core/keys.js';
import { scriptArgs, scriptFor } from '../../src/engine/driver.js';
import { enginePolicy } from '../../src/engine/algorithm.js';
import { decodeReply } from '../../src/engine/reply.js';

describe('memory store clock', () => {
  it('keeps expired state gone when the clock steps back, as Redis does, and keeps state written since', async () => {
    const clock = { now: 0 };
    const limiter = createLimiter({
      store: memoryStore({ now: () => clock.now }),
      policy: fixedWindow({ limit: 1, window: '1s' }),
    });
    assert.equal((await limiter.limit('k')).allowed, true); // expires at 1,001
    clock.now = 1_500;
    // Another client's call: the store sees the time pass without touching k.
    assert.equal((await limiter.limit('other')).allowed, true);
    clock.now = 500;
    assert.equal((await limiter.limit('k')).allowed, true, 'k expired at 1,001 and stays gone');
    // Written after the step back, expiring at 1,001 again: live until the clock passes that.
    clock.now = 600;
    assert.equal((await limiter.limit('k')).allowed, false);
    clock.now = 999;
    assert.equal((await limiter.limit('k')).allowed, false);
  });

  // The Lua reads such state as junk (sl_live; the strikes' end): the twin must decide as it does.
  it('reads a sliding log whose newest entry is more than a window ahead (the clock stepped back) as empty, as the Lua does', async () => {
    const clock = { now: 1_000_000 };
    const limiter = createLimiter({
      store: memoryStore({ now: () => clock.now }),
      policy: slidingLog({ limit: 1, window: '1s' }),
    });
    assert.equal((await limiter.limit('k')).allowed, true);
    clock.now -= 500;
    assert.equal((await limiter.limit('k')).allowed, false, 'within a window ahead: still counted');
    clock.now -= 1_600;
    assert.equal(await limiter.refund('k'), false, 'a junk log gives nothing back');
    assert.deepEqual([(await limiter.limit('k')).allowed, (await limiter.peek('k')).remaining], [true, 0]);
  });

  it('counts strikes forgotten further ahead than a block lasts (the clock stepped back) again from 1, as the Lua does', async () => {
    const clock = { now: 1_000_000 };
    const limiter = createLimiter({
      store: memoryStore({ now: () => clock.now }),
      policy: fixedWindow({ limit: 1, window: '1h' }),
      penalty: { after: 2, block: '1s' },
    });
    await limiter.limit('k');
    assert.equal((await limiter.limit('k')).blockedForMs, undefined); // one strike, forgotten at 1,001,000
    clock.now -= 5_000;
    assert.equal((await limiter.limit('k')).blockedForMs, undefined, 'a strike again, the first');
    assert.equal((await limiter.limit('k')).blockedForMs, 1_000, 'the second blocks');
  });
});

describe('memory store now', () => {
  it('reads a clock of fractional ms as whole ms, and refuses one that is not a number before writing', async () => {
    const fractional = createLimiter({
      store: memoryStore({ now: () => 1_000_000.4 }),
      policy: fixedWindow({ limit: 1, window: '1s' }),
    });
    await fractional.limit('k');
    assert.equal((await fractional.limit('k')).retryAfterMs, 1_000);
    const store = memoryStore({ now: () => Number.NaN });
    const broken = createLimiter({ store, policy: fixedWindow({ limit: 1, window: '1s' }) });
    await assert.rejects(broken.limit('k'), (e: unknown) => e instanceof InvalidOptionError && e.option === 'now');
    assert.equal(store.size, 0);
  });
});

describe('memory store eviction', () => {
  it('makes room from expired state before it evicts a live client, used or not', async () => {
    const clock = { now: 1_000_000 };
    const store = memoryStore({ maxKeys: 2, now: () => clock.now });
    const brief = createLimiter({ store, prefix: 'brief', policy: fixedWindow({ limit: 5, window: 50 }) });
    const hourly = createLimiter({ store, prefix: 'hourly', policy: fixedWindow({ limit: 1, window: '1h' }) });
    // a: used twice (spared once by eviction's second chance), its state gone in 50 ms.
    await brief.limit('a');
    await brief.limit('a');
    assert.equal((await hourly.limit('b')).allowed, true);
    clock.now += 100;
    // Two live keys, b's and c's: within maxKeys, so b keeps its state.
    assert.equal((await hourly.limit('c')).allowed, true);
    assert.equal((await hourly.limit('b')).allowed, false);
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

describe('memory store under a flood of distinct keys', () => {
  it('holds at most maxKeys of 250,000 new keys, evicting the least recently used', async () => {
    const maxKeys = 5_000;
    const store = memoryStore({ maxKeys, now: () => 1_000_000 });
    const policy = enginePolicy(fixedWindow({ limit: 3, window: '1h' }));
    // Straight to the store, as the limiter would call it, so the calls stay cheap.
    const script = scriptFor([policy.kind]);
    const call = async (key: string, op: 'limit' | 'peek' = 'limit') => {
      const keys = callKeys('p', key, [policy]);
      const reply = await store.run(
        script,
        keys,
        scriptArgs({ op, cost: 1, target: 0, ms: 0, penalty: { strikes: 0, blockMs: 0 }, policies: [policy] }),
      );
      const { allowed, policies } = decodeReply(reply);
      return [allowed, policies[0]?.remaining] as const;
    };
    await call('regular');
    for (let i = 0; i < 250_000; i++) {
      const [allowed, remaining] = await call(`attacker:${i}`);
      if (!allowed || remaining !== 2) assert.fail(`attacker:${i} got [${allowed}, ${remaining}]`);
      if (store.size > maxKeys) assert.fail(`${store.size} keys held after ${i + 1} new ones`);
      // A client seen often keeps its state: it is never the least recently used.
      if (i % 1_000 === 0) assert.equal((await call('regular', 'peek'))[1], 2);
    }
    assert.equal(store.size, maxKeys);
    assert.equal((await call('attacker:0'))[1], 2, 'an evicted key starts again');
  });
});
