import { MAX_DURATION_MS } from '../core/duration.js';
import { InvalidOptionError } from '../core/errors.js';
import type { Policy } from '../core/types.js';
import { optionsObject, policyName, policyUnit, positiveFinite, positiveInteger } from '../core/validate.js';
import { definePolicy } from '../engine/algorithm.js';
import { rateName } from './policy.js';
import { gcraOrTokenBucket } from './gcra-and-token-bucket.js';

export interface TokenBucketOptions {
  /** The most tokens the bucket holds: the largest burst. A new bucket starts full. */
  capacity: number;
  /** Tokens added per second, continuously (fractions allowed: 0.5 is one token every 2 s). */
  refillPerSecond: number;
  /** The policy's name in RateLimit headers (default: capacity and rate, e.g. '10-burst-2-per-1s'). */
  name?: string;
  /** What it counts (default 'requests'): the unit of a call's per-unit cost, e.g. { cost: { tokens: 1200 } } with counts: 'tokens'. */
  counts?: string;
}

// A token's refill time is kept in whole units of 100 ns, so that the key's value (the instant's
// distance below its ms, see gcra-and-token-bucket.ts) stays below 10,000, a shared integer in Redis.
const UNITS_PER_MS = 10_000;
const UNITS_PER_SECOND = 1000 * UNITS_PER_MS;

const algorithm = gcraOrTokenBucket(
  'tb',
  `
-- tokenBucket (ALG.tb): the bucket is held as the instant it is full again: tokens(now) =
-- capacity - (fullAt - now) * rate, at most capacity (fullAt <= now is a full bucket, as is a
-- missing key). Taking n tokens moves fullAt to max(fullAt, now) + n token refill times. Each
-- token's refill time is rounded up to the unit of 100 ns, so the bucket never refills faster
-- than refillPerSecond, and every sum is of integers: remaining, resetAfter and retryAfter are
-- exact for that rounded rate.
--   p  a token's refill time in units of 100 ns (step), capacity (size), 10000 units per ms (perMs)
`,
);

/** Bursts up to `capacity`, then `refillPerSecond` on average; O(1) memory per key. */
export function tokenBucket(options: TokenBucketOptions): Policy {
  const o = optionsObject('tokenBucket', options, ['capacity', 'refillPerSecond', 'name', 'counts'], {
    limit: 'use "capacity" (the largest burst) and "refillPerSecond"',
    max: 'use "capacity" (the largest burst) and "refillPerSecond"',
    points: 'use "capacity" (the largest burst) and "refillPerSecond"',
    tokensPerInterval: 'use "refillPerSecond"',
  });
  const capacity = positiveInteger('capacity', o.capacity);
  const refillPerSecond = positiveFinite('refillPerSecond', o.refillPerSecond);
  const windowMs = Math.ceil((capacity * 1000) / refillPerSecond);
  if (windowMs > MAX_DURATION_MS) {
    throw new InvalidOptionError(
      'refillPerSecond',
      refillPerSecond,
      `fast enough to refill ${capacity} tokens within 366 days`,
    );
  }
  const exactStep = UNITS_PER_SECOND / refillPerSecond;
  const step = Math.ceil(exactStep);
  if (step > exactStep * 1.001) {
    throw new InvalidOptionError(
      'refillPerSecond',
      refillPerSecond,
      'at most 10,000 per second, or a rate whose token refill time is a whole multiple of 100 ns: that time is rounded up to 100 ns, and must stay within 0.1% of the rate',
    );
  }
  return definePolicy(
    {
      algorithm: 'token-bucket',
      name: policyName(o.name, `${capacity}-burst-${rateName(refillPerSecond, 1000)}`),
      counts: policyUnit(o.counts),
      limit: capacity,
      windowMs,
      maxCost: capacity,
    },
    algorithm,
    [step, capacity, UNITS_PER_MS],
  );
}
