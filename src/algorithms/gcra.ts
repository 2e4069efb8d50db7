import { parseDuration, type Duration } from '../core/duration.js';
import { InvalidOptionError } from '../core/errors.js';
import type { Policy } from '../core/types.js';
import { optionsObject, policyName, policyUnit, positiveInteger } from '../core/validate.js';
import { definePolicy } from '../engine/algorithm.js';
import { rateName } from './policy.js';
import { gcraOrTokenBucket } from './gcra-and-token-bucket.js';

export interface GcraOptions {
  /** Requests per period, evenly spaced: the sustained rate. */
  limit: number;
  /** The period: ms or a duration string ('1s', '1h'). */
  period: Duration;
  /** How many requests may arrive at once (default `limit`). */
  burst?: number;
  /** The policy's name in RateLimit headers (default: the rate, and the burst if not `limit`: '5-per-1s', '10-burst-5-per-1s'). */
  name?: string;
  /** What it counts (default 'requests'): the unit of a call's per-unit cost, e.g. { cost: { tokens: 1200 } } with counts: 'tokens'. */
  counts?: string;
}

const MIN_INTERVAL_US = 500;

const algorithm = gcraOrTokenBucket(
  'gcra',
  `
-- gcra (ALG.gcra): the generic cell rate algorithm. With T the interval (us), a request of cost n
-- is admitted if max(TAT, now) + n*T <= now + burst*T, and then the theoretical arrival time TAT
-- becomes max(TAT, now) + n*T. A fresh key admits burst at once; after that one request every T.
-- Cost n is all or nothing. TAT is the instant the key is fresh again, so it is the key's expiry
-- (below): integer us, nothing lost to rounding.
--   p  T in us (step), burst (size), 1000 us per ms (perMs)
`,
);

/**
 * The generic cell rate algorithm: `limit` per `period`, evenly spaced, with up to `burst` at once.
 * Exact; the key's expiry holds the state, its value a remainder below 1,000.
 */
export function gcra(options: GcraOptions): Policy {
  const o = optionsObject('gcra', options, ['limit', 'period', 'burst', 'name', 'counts'], {
    max: 'use "limit"',
    points: 'use "limit"',
    window: 'use "period"',
    windowMs: 'use "period"',
    duration: 'use "period" (ms, or a string such as "1m")',
  });
  const limit = positiveInteger('limit', o.limit);
  const periodMs = parseDuration('period', o.period);
  const burst = o.burst === undefined ? limit : positiveInteger('burst', o.burst);
  // The interval is kept in whole µs; below 500 µs that rounding could move the rate by over 0.1%.
  const exactInterval = (periodMs * 1000) / limit;
  if (exactInterval < MIN_INTERVAL_US) {
    throw new InvalidOptionError(
      'limit',
      limit,
      `at most ${Math.floor((periodMs * 1000) / MIN_INTERVAL_US)} per period here (one request per 500 µs), so the µs-rounded interval stays within 0.1% of the rate`,
    );
  }
  const interval = Math.round(exactInterval);
  // A key is up to three bursts of intervals ahead, in µs (one held, one owed after a settle, one
  // asked): exact below 2^53.
  const mostExact = Math.floor(Number.MAX_SAFE_INTEGER / (3 * interval));
  if (burst > mostExact) {
    throw new InvalidOptionError(
      'burst',
      burst,
      `at most ${mostExact} at this rate, so that the schedule (three bursts of ${interval} µs intervals) stays exact below 2^53 µs`,
    );
  }
  // As a token bucket's capacity: `limit` is the most admitted at once (what `remaining` counts
  // down from, and the RateLimit-Policy quota), the burst; the window is the time to earn it again,
  // so that quota per window is still the rate (limit per period when there is no burst).
  const windowMs = Math.ceil((burst * periodMs) / limit);
  return definePolicy(
    {
      algorithm: 'gcra',
      name: policyName(o.name, `${burst === limit ? '' : `${burst}-burst-`}${rateName(limit, periodMs)}`),
      counts: policyUnit(o.counts),
      limit: burst,
      windowMs,
      maxCost: burst,
    },
    algorithm,
    [interval, burst, 1000],
  );
}
