import { fixedWindow, gcra, slidingLog, slidingWindow, tokenBucket, type Decision, type Policy } from '../../src/index.js';

/**
 * Every algorithm that limits a rate, built from one (limit, window) so that each test can run them
 * all alike. (concurrency limits requests in progress instead; its tests are its own.)
 */
export const algorithms: readonly { name: string; policy(limit: number, windowMs: number): Policy }[] = [
  { name: 'fixedWindow', policy: (limit, windowMs) => fixedWindow({ limit, window: windowMs }) },
  { name: 'slidingLog', policy: (limit, windowMs) => slidingLog({ limit, window: windowMs }) },
  // A bucket that refills `limit` tokens per window: the same average rate as the windows.
  { name: 'tokenBucket', policy: (limit, windowMs) => tokenBucket({ capacity: limit, refillPerSecond: (limit * 1000) / windowMs }) },
  { name: 'gcra', policy: (limit, windowMs) => gcra({ limit, period: windowMs }) },
  { name: 'slidingWindow', policy: (limit, windowMs) => slidingWindow({ limit, window: windowMs }) },
];

/** A decision's numbers, without its per-policy details, for comparing with a literal. */
export function numbers({ allowed, limit, remaining, resetAfterMs, retryAfterMs }: Decision) {
  return { allowed, limit, remaining, resetAfterMs, retryAfterMs };
}
