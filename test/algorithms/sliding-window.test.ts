import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { slidingWindow } from '../../src/index.js';
import { numbers, withClock } from '../support/algorithms.js';

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
