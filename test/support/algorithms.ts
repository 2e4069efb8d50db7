import {
  createLimiter,
  fixedWindow,
  gcra,
  memoryStore,
  slidingLog,
  slidingWindow,
  tokenBucket,
  type Decision,
  type Policy,
} from '../../src/index.js';
import { enginePolicy, type EnginePolicy } from '../../src/engine/algorithm.js';

/**
 * Every algorithm that limits a rate, built from one (limit, window) so that each test can run them
 * all alike. (concurrency limits requests in progress instead; its tests are its own.)
 */
export const algorithms: readonly {
  name: string;
  policy(limit: number, windowMs: number, more?: PolicyExtras): EnginePolicy;
}[] = [
  {
    name: 'fixedWindow',
    policy: (limit, windowMs, more) => enginePolicy(fixedWindow({ limit, window: windowMs, ...more })),
  },
  {
    name: 'slidingLog',
    policy: (limit, windowMs, more) => enginePolicy(slidingLog({ limit, window: windowMs, ...more })),
  },
  // A bucket that refills `limit` tokens per window: the same average rate as the windows.
  {
    name: 'tokenBucket',
    policy: (limit, windowMs, more) =>
      enginePolicy(tokenBucket({ capacity: limit, refillPerSecond: (limit * 1000) / windowMs, ...more })),
  },
  { name: 'gcra', policy: (limit, windowMs, more) => enginePolicy(gcra({ limit, period: windowMs, ...more })) },
  {
    name: 'slidingWindow',
    policy: (limit, windowMs, more) => enginePolicy(slidingWindow({ limit, window: windowMs, ...more })),
  },
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

/** A limiter on the memory store with a clock the test moves by hand. */
export function withClock(policy: Policy, start = 1_000_000) {
  const clock = { now: start };
  const limiter = createLimiter({ store: memoryStore({ now: () => clock.now }), policy });
  return { clock, limiter };
}
