import { fixedWindow, slidingLog, tokenBucket, type Policy } from '../../src/index.js';

/** Every algorithm, built from one (limit, window) so that each test can run them all alike. */
export const algorithms: readonly { name: string; policy(limit: number, windowMs: number): Policy }[] = [
  { name: 'fixedWindow', policy: (limit, windowMs) => fixedWindow({ limit, window: windowMs }) },
  { name: 'slidingLog', policy: (limit, windowMs) => slidingLog({ limit, window: windowMs }) },
  // A bucket that refills `limit` tokens per window: the same average rate as the windows.
  { name: 'tokenBucket', policy: (limit, windowMs) => tokenBucket({ capacity: limit, refillPerSecond: (limit * 1000) / windowMs }) },
];
