import type { Redis } from 'ioredis';
import { createLimiter, redisStore } from '../dist/esm/index.js';
import { THROUGHPUT, sluicePolicies } from './contenders.js';
import { keysFor, measure, median } from './measure.js';

export interface ManyResult {
  /** Keys per limitMany call. */
  readonly size: number;
  /** Per run: decisions per second with one limitMany call in flight at a time. */
  readonly decisionsPerSecond: readonly number[];
  /** Median over runs of each run's p50 per limitMany call, and per lone limit() call. */
  readonly p50ManyMs: number;
  readonly p50OneMs: number;
}

const SIZE = 100;

/** limitMany of SIZE keys, one call at a time, beside limit() of one key, on sluice's fixed window. */
export async function limitManyRuns(redis: Redis, runs: number, runMs: number): Promise<ManyResult> {
  const [fixedWindow] = sluicePolicies;
  if (fixedWindow === undefined) throw new Error('no sluice policy to measure');
  const limiter = createLimiter({
    store: redisStore(redis),
    policy: fixedWindow.policy(THROUGHPUT),
    prefix: 'bench-many',
  });
  const keys = keysFor(10_000);
  let next = 0;
  const nextBatch = (): string[] => Array.from({ length: SIZE }, () => keys[next++ % keys.length] as string);
  const perSecond: number[] = [];
  const p50Many: number[] = [];
  const p50One: number[] = [];
  for (let run = 0; run < runs; run++) {
    const many = await measure(() => limiter.limitMany(nextBatch()), keys, 1, runMs);
    perSecond.push(many.decisionsPerSecond * SIZE);
    p50Many.push(many.p50Ms);
    p50One.push((await measure((key) => limiter.limit(key), keys, 1, runMs)).p50Ms);
  }
  return { size: SIZE, decisionsPerSecond: perSecond, p50ManyMs: median(p50Many), p50OneMs: median(p50One) };
}
