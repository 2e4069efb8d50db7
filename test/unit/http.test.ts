import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { draft6Headers, draft7Headers, legacyHeaders, validHeaderMode } from '../../src/http/headers.js';
import { fixedWindow, InvalidOptionError, rateLimitHeaders, rateLimitResponse, tokenBucket, type Decision, type PolicyDecision } from '../../src/index.js';

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

describe('header modes', () => {
  const burst = fixedWindow({ limit: 10, window: '1s', name: 'burst' });
  const daily = fixedWindow({ limit: 1000, window: '1d', name: 'daily' });
  const allowed = (remaining: number, resetAfterMs: number): Decision => ({ allowed: true, limit: 0, remaining, resetAfterMs, retryAfterMs: 0 });
  const denied = (resetAfterMs: number, retryAfterMs: number): Decision => ({ allowed: false, limit: 0, remaining: 0, resetAfterMs, retryAfterMs });
  const both = (b: Decision, d: Decision): PolicyDecision[] => [
    { policy: burst, decision: b },
    { policy: daily, decision: d },
  ];

  it('draft-11 lists every policy, in order', () => {
    assert.deepEqual(rateLimitHeaders(both(allowed(9, 400), allowed(950, 3_600_000))), {
      'RateLimit-Policy': '"burst";q=10;w=1, "daily";q=1000;w=86400',
      RateLimit: '"burst";r=9;t=1, "daily";r=950;t=3600',
    });
  });

  it('Retry-After is the longest wait of the policies that denied', () => {
    const headers = rateLimitHeaders(both(denied(900, 900), denied(7_200_500, 7_200_500)));
    assert.equal(headers['Retry-After'], '7201');
    assert.equal(rateLimitHeaders(both(denied(900, 900), allowed(0, 7_200_500)))['Retry-After'], '1');
  });

  it('older drafts speak for the tightest policy: a denial, else the fewest remaining, else the longest reset', () => {
    assert.equal(draft7Headers(both(allowed(9, 400), allowed(950, 3_600_000))).RateLimit, 'limit=10, remaining=9, reset=1');
    assert.equal(draft7Headers(both(allowed(0, 400), denied(5_000, 5_000))).RateLimit, 'limit=1000, remaining=0, reset=5');
    assert.equal(draft7Headers(both(allowed(3, 400), allowed(3, 3_600_000))).RateLimit, 'limit=1000, remaining=3, reset=3600');
    assert.deepEqual(draft6Headers(both(allowed(9, 400), allowed(950, 3_600_000))), {
      'RateLimit-Policy': '10;w=1',
      'RateLimit-Limit': '10',
      'RateLimit-Remaining': '9',
      'RateLimit-Reset': '1',
    });
  });

  it('legacy X-RateLimit-Reset is epoch seconds, rounded up', () => {
    assert.deepEqual(legacyHeaders(both(allowed(9, 400), allowed(950, 3_600_000)), 1_700_000_000_100), {
      'X-RateLimit-Limit': '10',
      'X-RateLimit-Remaining': '9',
      'X-RateLimit-Reset': '1700000001',
    });
  });

  it('false sends only Retry-After, and only on a denial', () => {
    assert.deepEqual(rateLimitHeaders(both(allowed(9, 400), allowed(950, 1)), false), {});
    assert.deepEqual(rateLimitHeaders(both(denied(400, 400), allowed(950, 1)), false), { 'Retry-After': '1' });
  });

  it('rejects an unknown mode, naming the option', () => {
    assert.throws(() => validHeaderMode('draft-8'), (error: unknown) => error instanceof InvalidOptionError && error.option === 'headers');
    assert.throws(() => validHeaderMode(true), InvalidOptionError);
    assert.equal(validHeaderMode(undefined), 'draft-11');
  });
});
