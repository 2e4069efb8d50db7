import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidOptionError, createLimiter, fixedWindow, memoryStore, slidingLog } from '../../src/index.js';

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
