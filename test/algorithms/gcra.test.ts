import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { gcra, rateLimitHeaders } from '../../src/index.js';
import { numbers, withClock } from '../support/algorithms.js';

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
