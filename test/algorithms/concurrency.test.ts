import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { concurrency } from '../../src/index.js';
import { numbers, withClock } from '../support/algorithms.js';

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
