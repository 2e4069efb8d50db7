import {
  fixedWindow,
  gcra,
  slidingLog,
  slidingWindow,
  tokenBucket,
  type Decision,
  type Policy,
} from '../../src/index.js';

/**
 * Every algorithm that limits a rate, built from one (limit, window) so that each test can run them
 * all alike. (concurrency limits requests in progress instead; its tests are its own.)
 */
export const algorithms: readonly {
  name: string;
  policy(limit: number, windowMs: number, more?: PolicyExtras): Policy;
}[] = [
  { name: 'fixedWindow', policy: (limit, windowMs, more) => fixedWindow({ limit, window: windowMs, ...more }) },
  { name: 'slidingLog', policy: (limit, windowMs, more) => slidingLog({ limit, window: windowMs, ...more }) },
  // A bucket that refills `limit` tokens per window: the same average rate as the windows.
  {
    name: 'tokenBucket',
    policy: (limit, windowMs, more) =>
      tokenBucket({ capacity: limit, refillPerSecond: (limit * 1000) / windowMs, ...more }),
  },
  { name: 'gcra', policy: (limit, windowMs, more) => gcra({ limit, period: windowMs, ...more }) },
  { name: 'slidingWindow', policy: (limit, windowMs, more) => slidingWindow({ limit, window: windowMs, ...more }) },
];

/** The options every rate policy takes beside its quota. */
export interface PolicyExtras {
  name?: string;
  counts?: string;
}

/** A decision's numbers, without its per-policy details, for comparing with a literal. */
export function numbers({ allowed, limit, remaining, resetAfterMs, retryAfterMs }: Decision) {
  return { allowed, limit, remaining, resetAfterMs, retryAfterMs };
}
