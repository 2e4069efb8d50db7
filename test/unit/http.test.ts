import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fixedWindow, rateLimitResponse, tokenBucket } from '../../src/index.js';

describe('rateLimitResponse', () => {
  const policy = fixedWindow({ limit: 100, window: '1m', name: 'burst' });

  it('passes an allowed request with draft-11 fields', () => {
    const response = rateLimitResponse({ allowed: true, limit: 100, remaining: 42, resetAfterMs: 30_001, retryAfterMs: 0 }, policy);
    assert.deepEqual(response, {
      status: 200,
      statusText: 'OK',
      headers: { 'RateLimit-Policy': '"burst";q=100;w=60', RateLimit: '"burst";r=42;t=31' },
    });
  });

  it('answers a denial with 429 and Retry-After in whole seconds, rounded up', () => {
    const response = rateLimitResponse({ allowed: false, limit: 100, remaining: 0, resetAfterMs: 36_200, retryAfterMs: 36_200 }, policy);
    assert.equal(response.status, 429);
    assert.equal(response.statusText, 'Too Many Requests');
    assert.equal(response.headers['Retry-After'], '37');
    assert.equal(response.headers.RateLimit, '"burst";r=0;t=37');
    const barely = rateLimitResponse({ allowed: false, limit: 100, remaining: 0, resetAfterMs: 1, retryAfterMs: 1 }, policy);
    assert.equal(barely.headers['Retry-After'], '1');
  });

  it('describes a token bucket by its capacity and the time to refill it', () => {
    const bucket = tokenBucket({ capacity: 10, refillPerSecond: 4 });
    const response = rateLimitResponse({ allowed: true, limit: 10, remaining: 9, resetAfterMs: 250, retryAfterMs: 0 }, bucket);
    assert.equal(response.headers['RateLimit-Policy'], '"token-bucket";q=10;w=3');
  });
});
