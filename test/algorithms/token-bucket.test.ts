import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { tokenBucket } from '../../src/index.js';
import { numbers, withClock } from '../support/algorithms.js';

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
