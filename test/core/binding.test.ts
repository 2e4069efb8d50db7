import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bindingPolicy } from '../../src/core/binding.js';
import { createLimiter, fixedWindow, memoryStore, type PolicyDecision } from '../../src/index.js';

/** A policy's part in a decision; `retryAfterMs` > 0 means it denied. */
function part(name: string, remaining: number, resetAfterMs: number, retryAfterMs = 0): PolicyDecision {
  return {
    name,
    algorithm: 'fixed-window',
    counts: 'requests',
    limit: 10,
    windowMs: 60_000,
    allowed: retryAfterMs === 0,
    remaining,
    resetAfterMs,
    retryAfterMs,
  };
}

describe('bindingPolicy', () => {
  it('is, of the policies that denied, the one with the longest wait, however many remain elsewhere', () => {
    assert.equal(bindingPolicy([part('a', 0, 1_000, 1_000), part('b', 1, 3_589_000, 3_589_000)]).name, 'b');
    assert.equal(bindingPolicy([part('a', 0, 1_000), part('b', 5, 9_000, 9_000)]).name, 'b');
  });

  it('is, when every policy admits, the one with the fewest remaining', () => {
    assert.equal(bindingPolicy([part('a', 4, 1_000), part('b', 3, 500)]).name, 'b');
  });

  it('breaks ties by fewer remaining, then the longer reset, then the order', () => {
    assert.equal(bindingPolicy([part('a', 2, 5_000, 5_000), part('b', 0, 5_000, 5_000)]).name, 'b');
    assert.equal(bindingPolicy([part('a', 3, 1_000), part('b', 3, 2_000)]).name, 'b');
    assert.equal(bindingPolicy([part('a', 3, 1_000), part('b', 3, 1_000)]).name, 'a');
  });

  it("gives the limiter's decision its numbers (the issue's example: 2 per 1 s and 5 per 1 h, three calls of cost 2)", async () => {
    const clock = { now: 1_800_000_000_000 };
    const limiter = createLimiter({
      store: memoryStore({ now: () => clock.now }),
      policy: [
        fixedWindow({ limit: 2, window: '1s', name: 'per-second' }),
        fixedWindow({ limit: 5, window: '1h', name: 'per-hour' }),
      ],
    });
    await limiter.limit('k', { cost: 2 });
    clock.now += 1_000;
    await limiter.limit('k', { cost: 2 });
    const denied = await limiter.limit('k', { cost: 2 });
    assert.deepEqual(
      {
        allowed: denied.allowed,
        limit: denied.limit,
        remaining: denied.remaining,
        resetAfterMs: denied.resetAfterMs,
        retryAfterMs: denied.retryAfterMs,
      },
      { allowed: false, limit: 5, remaining: 1, resetAfterMs: 3_599_000, retryAfterMs: 3_599_000 },
    );
  });
});
