import { Ratelimit } from '@upstash/ratelimit';
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis } from 'rate-limiter-flexible';
import { createLimiter, fixedWindow, memoryStore, redisStore, slidingLog, tokenBucket, type Policy } from '../src/index.js';
import type { Decide } from './measure.js';
import { upstashRedis } from './upstash-shim.js';

/** One limiter under test, deciding one key per call. */
export interface Contender {
  /** e.g. 'sluice fixedWindow', 'rate-limiter-flexible RateLimiterRedis'. */
  readonly name: string;
  readonly library: 'sluice' | 'rate-limiter-flexible' | '@upstash/ratelimit' | 'ioredis';
  readonly decide: Decide;
}

// Limits so high that the spread-out runs are always allowed, so that every contender does the
// same work (count and write); a window long enough to outlast a run. The sliding log keeps one
// member per request, so its limit is its maximum.
const WINDOW_SECONDS = 60;
const LIMIT = 1_000_000_000;

/** sluice's algorithms, each as a policy allowing about LIMIT per window. */
export const sluicePolicies: readonly { readonly name: string; policy(): Policy }[] = [
  { name: 'fixedWindow', policy: () => fixedWindow({ limit: LIMIT, window: WINDOW_SECONDS * 1000 }) },
  { name: 'slidingLog', policy: () => slidingLog({ limit: 10_000, window: WINDOW_SECONDS * 1000 }) },
  { name: 'tokenBucket', policy: () => tokenBucket({ capacity: LIMIT, refillPerSecond: LIMIT / WINDOW_SECONDS }) },
];

// rate-limiter-flexible rejects a denied consume() with its result object (not an Error): a
// decision like any other here. Real failures are Errors and still fail the run.
function settled(promise: Promise<unknown>): Promise<unknown> {
  return promise.catch((reason: unknown) => {
    if (reason instanceof Error) throw reason;
    return reason;
  });
}

/** Every limiter deciding in Redis, on one ioredis client (auto-pipelined for all alike). */
export function redisContenders(redis: Redis): Contender[] {
  const sluice = sluicePolicies.map(({ name, policy }): Contender => {
    const limiter = createLimiter({ store: redisStore(redis), policy: policy(), prefix: 'bench' });
    return { name: `sluice ${name}`, library: 'sluice', decide: (key) => limiter.limit(key) };
  });
  const flexible = new RateLimiterRedis({ storeClient: redis, points: LIMIT, duration: WINDOW_SECONDS, keyPrefix: 'bench-rlf' });
  const upstashClient = upstashRedis(redis);
  const upstash = (algorithm: string, limiter: ConstructorParameters<typeof Ratelimit>[0]['limiter']): Contender => {
    // timeout 0: no timer per call, upstash at its fastest; analytics stay off (the default).
    const ratelimit = new Ratelimit({ redis: upstashClient as never, limiter, prefix: `bench-up-${algorithm}`, timeout: 0 });
    return { name: `@upstash/ratelimit ${algorithm}`, library: '@upstash/ratelimit', decide: (key) => ratelimit.limit(key) };
  };
  return [
    ...sluice,
    { name: 'rate-limiter-flexible RateLimiterRedis', library: 'rate-limiter-flexible', decide: (key) => settled(flexible.consume(key)) },
    upstash('fixedWindow', Ratelimit.fixedWindow(LIMIT, `${WINDOW_SECONDS} s`)),
    upstash('slidingWindow', Ratelimit.slidingWindow(LIMIT, `${WINDOW_SECONDS} s`)),
    upstash('tokenBucket', Ratelimit.tokenBucket(LIMIT / WINDOW_SECONDS, '1 s', LIMIT)),
  ];
}

/** The ceiling: what the same client does with the cheapest write there is. */
export function incrCeiling(redis: Redis): Contender {
  return { name: 'ioredis INCR', library: 'ioredis', decide: (key) => redis.incr(`bench-incr:${key}`) };
}

/** The yardstick for memory: one plain integer counter with a TTL per client. */
export function plainCounter(redis: Redis): Contender {
  return { name: 'plain counter with TTL', library: 'ioredis', decide: (key) => redis.set(`bench-counter:${key}`, 1, 'PX', WINDOW_SECONDS * 1000) };
}

/** Every limiter deciding in this process. */
export function inProcessContenders(): Contender[] {
  const sluice = sluicePolicies.map(({ name, policy }): Contender => {
    const limiter = createLimiter({ store: memoryStore(), policy: policy(), prefix: 'bench' });
    return { name: `sluice memoryStore ${name}`, library: 'sluice', decide: (key) => limiter.limit(key) };
  });
  const flexible = new RateLimiterMemory({ points: LIMIT, duration: WINDOW_SECONDS });
  return [...sluice, { name: 'rate-limiter-flexible RateLimiterMemory', library: 'rate-limiter-flexible', decide: (key) => settled(flexible.consume(key)) }];
}
