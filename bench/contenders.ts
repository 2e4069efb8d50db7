import { Ratelimit } from '@upstash/ratelimit';
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis } from 'rate-limiter-flexible';
import {
  createLimiter,
  fixedWindow,
  gcra,
  memoryStore,
  redisStore,
  slidingLog,
  slidingWindow,
  tokenBucket,
  type Duration,
  type Policy,
} from '../dist/esm/index.js';
import type { Decide } from './measure.js';
import { upstashRedis } from './upstash-shim.js';

/** One limiter under test, deciding one key per call. */
export interface Contender {
  /** e.g. 'sluice fixedWindow', 'rate-limiter-flexible RateLimiterRedis'. */
  readonly name: string;
  readonly library: 'sluice' | 'rate-limiter-flexible' | '@upstash/ratelimit' | 'ioredis';
  readonly decide: Decide;
}

/** How much each contender allows: `limit` per `windowSeconds` (buckets: `limit` tokens, refilled in that time). */
export interface Quota {
  readonly limit: number;
  readonly windowSeconds: number;
}

// For speed: so high that every call is admitted, so that all do the same work (count and write).
// The windows (at most a day) outlive a run, so their keys do. gcra and tokenBucket keep a key only
// until it is fresh again: each request moves that 26 ms ahead (300 days over 10^9), and at 256 in
// flight over 10,000 keys a key comes back every 50 ms or so, so most of their decisions write a
// key anew that Redis then expires, as for a client well below its rate (about 400,000 keys
// expired in 2 s of each, measured once). The sliding log keeps one member per request, so its
// limit is its maximum.
export const THROUGHPUT: Quota = { limit: 1_000_000_000, windowSeconds: 300 * 86_400 };
// For memory: a typical API quota, so each key holds what it would in production.
export const TYPICAL: Quota = { limit: 100, windowSeconds: 3600 };

/** sluice's algorithms, each as a policy for a quota. */
export const sluicePolicies: readonly { readonly name: string; readonly policy: (quota: Quota) => Policy }[] = [
  {
    name: 'fixedWindow',
    policy: ({ limit, windowSeconds }) => fixedWindow({ limit, window: Math.min(windowSeconds, 86_400) * 1000 }),
  },
  {
    name: 'slidingLog',
    policy: ({ limit, windowSeconds }) =>
      slidingLog({ limit: Math.min(limit, 10_000), window: Math.min(windowSeconds, 86_400) * 1000 }),
  },
  {
    name: 'tokenBucket',
    policy: ({ limit, windowSeconds }) => tokenBucket({ capacity: limit, refillPerSecond: limit / windowSeconds }),
  },
  { name: 'gcra', policy: ({ limit, windowSeconds }) => gcra({ limit, period: windowSeconds * 1000 }) },
  {
    name: 'slidingWindow',
    policy: ({ limit, windowSeconds }) => {
      const window = Math.min(windowSeconds, 86_400) * 1000;
      // Its largest limit for the window (three times limit * window below 2^53): still never reached.
      return slidingWindow({ limit: Math.min(limit, Math.floor(Number.MAX_SAFE_INTEGER / (3 * window))), window });
    },
  },
];

// rate-limiter-flexible rejects a denied consume() with its result object (not an Error): a
// decision like any other here. Real failures are Errors and still fail the run.
function settled(promise: Promise<unknown>): Promise<unknown> {
  return promise.catch((reason: unknown) => {
    if (reason instanceof Error) throw reason;
    return reason;
  });
}

/**
 * Every limiter deciding in Redis, on one ioredis client (auto-pipelined for all alike). `timeout`:
 * sluice's (its default unless given), for a server slowed down on purpose (under valgrind).
 */
export function redisContenders(redis: Redis, quota: Quota = THROUGHPUT, timeout?: Duration): Contender[] {
  const { limit, windowSeconds } = quota;
  const window = Math.min(windowSeconds, 86_400);
  const sluice = sluicePolicies.map(({ name, policy }): Contender => {
    const limiter = createLimiter({ store: redisStore(redis), policy: policy(quota), prefix: 'bench', timeout });
    return { name: `sluice ${name}`, library: 'sluice', decide: (key) => limiter.limit(key) };
  });
  const flexible = new RateLimiterRedis({
    storeClient: redis,
    points: limit,
    duration: window,
    keyPrefix: 'bench-rlf',
  });
  const upstashClient = upstashRedis(redis);
  const upstash = (algorithm: string, limiter: ConstructorParameters<typeof Ratelimit>[0]['limiter']): Contender => {
    // timeout 0: no timer per call, upstash at its fastest; analytics stay off (the default).
    const ratelimit = new Ratelimit({
      redis: upstashClient as never,
      limiter,
      prefix: `bench-up-${algorithm}`,
      timeout: 0,
    });
    return {
      name: `@upstash/ratelimit ${algorithm}`,
      library: '@upstash/ratelimit',
      decide: (key) => ratelimit.limit(key),
    };
  };
  return [
    ...sluice,
    {
      name: 'rate-limiter-flexible RateLimiterRedis',
      library: 'rate-limiter-flexible',
      decide: (key) => settled(flexible.consume(key)),
    },
    upstash('fixedWindow', Ratelimit.fixedWindow(limit, `${window} s`)),
    upstash('slidingWindow', Ratelimit.slidingWindow(limit, `${window} s`)),
    // Upstash refills a whole number of tokens per interval: `limit` per window, stepwise.
    upstash('tokenBucket', Ratelimit.tokenBucket(limit, `${windowSeconds} s`, limit)),
  ];
}

/** The ceiling: what the same client does with the cheapest write there is. */
export function incrCeiling(redis: Redis): Contender {
  return { name: 'ioredis INCR', library: 'ioredis', decide: (key) => redis.incr(`bench-incr:${key}`) };
}

/**
 * The yardstick for memory: one plain integer counter with a TTL per client, under a key as long
 * as sluice's (`bench:{<key>}:fw`), so that only what is stored differs.
 */
export function plainCounter(redis: Redis): Contender {
  return {
    name: 'plain counter with TTL',
    library: 'ioredis',
    decide: (key) => redis.set(`bench:{${key}}:pc`, 1, 'PX', TYPICAL.windowSeconds * 1000),
  };
}

/** Every limiter deciding in this process. */
export function inProcessContenders(): Contender[] {
  const sluice = sluicePolicies.map(({ name, policy }): Contender => {
    const limiter = createLimiter({ store: memoryStore(), policy: policy(THROUGHPUT), prefix: 'bench' });
    return { name: `sluice memoryStore ${name}`, library: 'sluice', decide: (key) => limiter.limit(key) };
  });
  const flexible = new RateLimiterMemory({ points: THROUGHPUT.limit, duration: 86_400 });
  return [
    ...sluice,
    {
      name: 'rate-limiter-flexible RateLimiterMemory',
      library: 'rate-limiter-flexible',
      decide: (key) => settled(flexible.consume(key)),
    },
  ];
}
