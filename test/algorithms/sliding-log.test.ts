import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { slidingLog } from '../../src/index.js';
import { numbers, withClock } from '../support/algorithms.js';

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
