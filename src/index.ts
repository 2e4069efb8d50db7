export { createLimiter, type Limiter, type LimiterOptions, type LimitOptions } from './core/limiter.js';
export type { DeniedCacheOptions } from './core/denied-cache.js';
export type { Decision, Policy } from './core/types.js';
export type { Duration } from './core/duration.js';
export {
  SluiceError,
  InvalidOptionError,
  InvalidArgumentError,
  CostExceedsLimitError,
  StoreError,
  type SluiceErrorCode,
} from './core/errors.js';
export { fixedWindow, type FixedWindowOptions } from './algorithms/fixed-window.js';
export { slidingLog, type SlidingLogOptions, SLIDING_LOG_MAX_LIMIT } from './algorithms/sliding-log.js';
export { tokenBucket, type TokenBucketOptions } from './algorithms/token-bucket.js';
export type { Store } from './stores/store.js';
export { memoryStore, type MemoryStore, type MemoryStoreOptions } from './stores/memory.js';
export { redisStore, type RedisClient } from './stores/redis.js';
export { rateLimitResponse, type RateLimitResponse } from './http/headers.js';
