import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { hostileKeys } from '../support/hostile-keys.js';
import {
  draft6Headers,
  draft7Headers,
  goDuration,
  legacyHeaders,
  moreQuotaAfterMs,
  validHeaderMode,
} from '../../src/http/headers.js';
import {
  InvalidOptionError,
  rateLimitHeaders,
  rateLimitResponse,
  type Decision,
  type PolicyDecision,
} from '../../src/index.js';

/** A policy's part of a decision; `retryAfterMs` > 0 means it denied. */
function part(
  name: string,
  limit: number,
  windowMs: number,
  remaining: number,
  resetAfterMs: number,
  retryAfterMs = 0,
): PolicyDecision {
  return {
    name,
    algorithm: 'fixed-window',
    counts: 'requests',
    limit,
    windowMs,
    allowed: retryAfterMs === 0,
    remaining,
    resetAfterMs,
    retryAfterMs,
  };
}

/** A decision over its policies, the way the limiter builds one: denied if any denies, for the longest wait. */
function decision(...policies: PolicyDecision[]): Decision {
  const [first] = policies;
  if (!first) throw new Error('a decision has a policy');
  const retryAfterMs = Math.max(...policies.map((p) => p.retryAfterMs));
  return {
    allowed: retryAfterMs === 0,
    limit: first.limit,
    remaining: first.remaining,
    resetAfterMs: first.resetAfterMs,
    retryAfterMs,
    policies,
  };
}

describe('rateLimitResponse', () => {
  it('passes an allowed request with draft-11 fields', () => {
    assert.deepEqual(rateLimitResponse(decision(part('burst', 100, 60_000, 42, 30_001))), {
      status: 200,
      statusText: 'OK',
      headers: { 'RateLimit-Policy': '"burst";q=100;w=60', RateLimit: '"burst";r=42;t=31' },
    });
  });

  it('answers a denial with 429 and Retry-After in whole seconds, rounded up', () => {
    const response = rateLimitResponse(decision(part('burst', 100, 60_000, 0, 36_200, 36_200)));
    assert.equal(response.status, 429);
    assert.equal(response.statusText, 'Too Many Requests');
    assert.equal(response.headers['Retry-After'], '37');
    assert.equal(response.headers.RateLimit, '"burst";r=0;t=37');
    assert.equal(rateLimitResponse(decision(part('burst', 100, 60_000, 0, 1, 1))).headers['Retry-After'], '1');
  });

  it('sends no Retry-After in shadow mode, where the request passes', () => {
    const shadowed: Decision = {
      ...decision(part('burst', 100, 60_000, 0, 5_000, 5_000)),
      allowed: true,
      retryAfterMs: 0,
      shadow: true,
      shadowDenied: true,
    };
    assert.equal(rateLimitResponse(shadowed).headers['Retry-After'], undefined);
  });
});

describe("draft-11's t: the wait for more quota", () => {
  const of = (
    algorithm: string,
    limit: number,
    windowMs: number,
    remaining: number,
    resetAfterMs: number,
    retryAfterMs = 0,
  ): PolicyDecision => ({
    ...part('p', limit, windowMs, remaining, resetAfterMs, retryAfterMs),
    algorithm,
  });

  it('is the wait of a policy that denied', () => {
    assert.equal(moreQuotaAfterMs(of('token-bucket', 10, 10_000, 0, 10_000, 1_000)), 1_000);
    assert.equal(moreQuotaAfterMs(of('sliding-log', 10, 60_000, 0, 59_000, 12_000)), 12_000);
  });

  it('is the next unit of a token bucket or GCRA, one every windowMs / limit', () => {
    assert.equal(moreQuotaAfterMs(of('token-bucket', 10, 10_000, 8, 1_500)), 500);
    assert.equal(moreQuotaAfterMs(of('token-bucket', 10, 10_000, 0, 10_000)), 1_000);
    // 3 per 10 s, two units ahead: 6,666.67 ms, rounded up to 6,667 by the decision. The next unit is 3,333.33 ms away.
    assert.equal(moreQuotaAfterMs(of('gcra', 3, 10_000, 1, 6_667)), 10_000 / 3);
    assert.equal(moreQuotaAfterMs(of('gcra', 3, 10_000, 3, 0)), 0);
  });

  it('is the full reset of any other algorithm', () => {
    assert.equal(moreQuotaAfterMs(of('fixed-window', 10, 60_000, 4, 42_000)), 42_000);
    assert.equal(moreQuotaAfterMs(of('sliding-log', 10, 60_000, 4, 59_000)), 59_000);
  });
});

describe('header modes', () => {
  const burst = (remaining: number, resetAfterMs: number, retryAfterMs = 0) =>
    part('burst', 10, 1_000, remaining, resetAfterMs, retryAfterMs);
  const daily = (remaining: number, resetAfterMs: number, retryAfterMs = 0) =>
    part('daily', 1000, 86_400_000, remaining, resetAfterMs, retryAfterMs);

  it("draft-8's partition key is the first 12 bytes of the key's SHA-256, in base64", () => {
    for (const key of ['127.0.0.1', '2001:db8::/56', ...hostileKeys]) {
      const pk = createHash('sha256').update(key).digest().subarray(0, 12).toString('base64');
      assert.equal(
        rateLimitHeaders(decision(burst(9, 400)), 'draft-8', 0, key)['RateLimit-Policy'],
        `"burst";q=10;w=1;pk=:${pk}:`,
      );
    }
  });

  it('draft-11 lists every policy, in order', () => {
    assert.deepEqual(rateLimitHeaders(decision(burst(9, 400), daily(950, 3_600_000))), {
      'RateLimit-Policy': '"burst";q=10;w=1, "daily";q=1000;w=86400',
      RateLimit: '"burst";r=9;t=1, "daily";r=950;t=3600',
    });
  });

  it('draft-11 gives a policy the quota it has now, whatever another policy of the same name had', () => {
    const policyField = (p: PolicyDecision) => rateLimitHeaders(decision(p))['RateLimit-Policy'];
    assert.equal(policyField(part('tier', 10, 1000, 9, 400)), '"tier";q=10;w=1');
    assert.equal(policyField(part('tier', 20, 1000, 9, 400)), '"tier";q=20;w=1');
    assert.equal(policyField(part('tier', 20, 60_000, 9, 400)), '"tier";q=20;w=60');
    assert.equal(
      policyField({ ...part('tier', 20, 60_000, 9, 400), counts: 'tokens' }),
      '"tier";q=20;qu="tokens";w=60',
    );
    assert.equal(policyField(part('tier', 10, 1000, 9, 400)), '"tier";q=10;w=1');
  });

  it('Retry-After is the longest wait of the policies that denied', () => {
    assert.equal(rateLimitHeaders(decision(burst(0, 900, 900), daily(0, 7_200_500, 7_200_500)))['Retry-After'], '7201');
    assert.equal(rateLimitHeaders(decision(burst(0, 900, 900), daily(0, 7_200_500)))['Retry-After'], '1');
  });

  it('older drafts speak for the tightest policy: a denial, else the fewest remaining, else the longest reset', () => {
    assert.equal(draft7Headers([burst(9, 400), daily(950, 3_600_000)]).RateLimit, 'limit=10, remaining=9, reset=1');
    assert.equal(draft7Headers([burst(0, 400), daily(0, 5_000, 5_000)]).RateLimit, 'limit=1000, remaining=0, reset=5');
    assert.equal(draft7Headers([burst(3, 400), daily(3, 3_600_000)]).RateLimit, 'limit=1000, remaining=3, reset=3600');
    assert.deepEqual(draft6Headers([burst(9, 400), daily(950, 3_600_000)]), {
      'RateLimit-Policy': '10;w=1',
      'RateLimit-Limit': '10',
      'RateLimit-Remaining': '9',
      'RateLimit-Reset': '1',
    });
  });

  it('legacy X-RateLimit-Reset is epoch seconds, rounded up', () => {
    assert.deepEqual(legacyHeaders([burst(9, 400), daily(950, 3_600_000)], 1_700_000_000_100), {
      'X-RateLimit-Limit': '10',
      'X-RateLimit-Remaining': '9',
      'X-RateLimit-Reset': '1700000001',
    });
  });

  describe('budgets in several units', () => {
    const inUnit = (p: PolicyDecision, counts: string): PolicyDecision => ({ ...p, counts });
    const requests = (remaining: number, resetAfterMs: number, retryAfterMs = 0) =>
      part('requests', 60, 60_000, remaining, resetAfterMs, retryAfterMs);
    const tokens = (remaining: number, resetAfterMs: number, retryAfterMs = 0) =>
      inUnit(part('tokens', 100_000, 60_000, remaining, resetAfterMs, retryAfterMs), 'tokens');
    const daily = (remaining: number, resetAfterMs: number) =>
      inUnit(part('tokens-daily', 5_000_000, 86_400_000, remaining, resetAfterMs), 'tokens');

    it('draft-11 and draft-8 give each policy its quota unit (qu) unless it counts requests', () => {
      assert.equal(
        rateLimitHeaders(decision(requests(59, 1_000), tokens(98_470, 60_000)))['RateLimit-Policy'],
        '"requests";q=60;w=60, "tokens";q=100000;qu="tokens";w=60',
      );
      assert.equal(
        rateLimitHeaders(decision(tokens(98_470, 60_000)), 'draft-8')['RateLimit-Policy'],
        '"tokens";q=100000;qu="tokens";w=60',
      );
    });

    it("'openai' sends each unit's limit, remaining and reset, from the unit's binding policy, as OpenAI does", () => {
      assert.deepEqual(
        rateLimitHeaders(
          decision(requests(59, 1_000), tokens(98_470, 360_000), daily(4_998_470, 86_400_000)),
          'openai',
        ),
        {
          'x-ratelimit-limit-requests': '60',
          'x-ratelimit-remaining-requests': '59',
          'x-ratelimit-reset-requests': '1s',
          'x-ratelimit-limit-tokens': '100000',
          'x-ratelimit-remaining-tokens': '98470',
          'x-ratelimit-reset-tokens': '6m0s',
        },
      );
      const denied = rateLimitHeaders(
        decision(requests(59, 1_000), tokens(0, 1_500, 1_500), daily(4_998_470, 86_400_000)),
        'openai',
      );
      assert.deepEqual(
        [
          denied['x-ratelimit-remaining-tokens'],
          denied['x-ratelimit-reset-tokens'],
          denied['retry-after-ms'],
          denied['Retry-After'],
        ],
        ['0', '1.5s', '1500', '2'],
      );
    });

    it("writes durations in Go's form", () => {
      assert.deepEqual([0, 20, 999, 1000, 1500, 60_000, 61_250, 3_600_000, 3_723_000].map(goDuration), [
        '0s',
        '20ms',
        '999ms',
        '1s',
        '1.5s',
        '1m0s',
        '1m1.25s',
        '1h0m0s',
        '1h2m3s',
      ]);
    });
  });

  it('false sends only Retry-After, and only on a denial', () => {
    assert.deepEqual(rateLimitHeaders(decision(burst(9, 400), daily(950, 1)), false), {});
    assert.deepEqual(rateLimitHeaders(decision(burst(0, 400, 400), daily(950, 1)), false), { 'Retry-After': '1' });
  });

  it('rejects an unknown mode, naming the option', () => {
    assert.throws(
      () => validHeaderMode('draft-9'),
      (error: unknown) => error instanceof InvalidOptionError && error.option === 'headers',
    );
    assert.throws(() => validHeaderMode(true), InvalidOptionError);
    assert.equal(validHeaderMode(undefined), 'draft-11');
  });
});
