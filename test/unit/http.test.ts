import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { rateLimitResponse, type Decision, type PolicyDecision } from '../../src/index.js';

function decision(allowed: boolean, ...policies: PolicyDecision[]): Decision {
  const [first] = policies;
  if (!first) throw new Error('a decision has a policy');
  return { allowed, limit: first.limit, remaining: first.remaining, resetAfterMs: first.resetAfterMs, retryAfterMs: first.retryAfterMs, policies };
}

const burst = (remaining: number, resetAfterMs: number, retryAfterMs = 0): PolicyDecision => ({
  name: 'burst',
  algorithm: 'fixed-window',
  limit: 100,
  windowMs: 60_000,
  allowed: retryAfterMs === 0,
  remaining,
  resetAfterMs,
  retryAfterMs,
});

describe('rateLimitResponse', () => {
  it('passes an allowed request with draft-11 fields', () => {
    assert.deepEqual(rateLimitResponse(decision(true, burst(42, 30_001))), {
      status: 200,
      statusText: 'OK',
      headers: { 'RateLimit-Policy': '"burst";q=100;w=60', RateLimit: '"burst";r=42;t=31' },
    });
  });

  it('answers a denial with 429 and Retry-After in whole seconds, rounded up', () => {
    const response = rateLimitResponse(decision(false, burst(0, 36_200, 36_200)));
    assert.equal(response.status, 429);
    assert.equal(response.statusText, 'Too Many Requests');
    assert.equal(response.headers['Retry-After'], '37');
    assert.equal(response.headers.RateLimit, '"burst";r=0;t=37');
    assert.equal(rateLimitResponse(decision(false, burst(0, 1, 1))).headers['Retry-After'], '1');
  });

  it('lists every policy of a limiter with several', () => {
    const daily: PolicyDecision = { name: 'daily', algorithm: 'gcra', limit: 1000, windowMs: 86_400_000, allowed: true, remaining: 980, resetAfterMs: 1_728_000, retryAfterMs: 0 };
    const response = rateLimitResponse(decision(true, burst(50, 30_000), daily));
    assert.equal(response.headers['RateLimit-Policy'], '"burst";q=100;w=60, "daily";q=1000;w=86400');
    assert.equal(response.headers.RateLimit, '"burst";r=50;t=30, "daily";r=980;t=1728');
  });
});
