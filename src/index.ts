export { createLimiter, type LimiterOptions } from './limiter/limiter.js';
export {
  createJointLimiter,
  type JointDecision,
  type JointLimiter,
  type JointLimiterOptions,
  type JointPart,
} from './limiter/joint.js';
export type {
  CostByUnit,
  Decision,
  FailureReason,
  Lease,
  Limiter,
  LimitOptions,
  Operation,
  Policy,
  PolicyDecision,
  RefundOptions,
  Reservation,
  StorageKeys,
  StoreFailure,
  StoreRecovery,
  StoreWatcher,
  WaitOptions,
} from './core/types.js';
export type { StoreErrorPolicy } from './limiter/failure-options.js';
export type { DeniedCacheOptions } from './limiter/denied-cache.js';
export type { Duration } from './core/duration.js';
export {
  SluiceError,
  InvalidOptionError,
  InvalidArgumentError,
  CostExceedsLimitError,
  StoreError,
  StoreTimeoutError,
  StorePermissionError,
  WrongMethodError,
  type SluiceErrorCode,
  type SluiceWarningCode,
} from './core/errors.js';
export { fixedWindow, type FixedWindowOptions } from './algorithms/fixed-window.js';
export { slidingLog, type SlidingLogOptions } from './algorithms/sliding-log.js';
export { tokenBucket, type TokenBucketOptions } from './algorithms/token-bucket.js';
export { gcra, type GcraOptions } from './algorithms/gcra.js';
export { slidingWindow, type SlidingWindowOptions } from './algorithms/sliding-window.js';
export { concurrency, type ConcurrencyOptions } from './algorithms/concurrency.js';
// What redisStore() and memoryStore() return, to type a variable; not an extension point (docs/architecture.md).
export type { Store } from './engine/store.js';
export { memoryStore, type MemoryStore, type MemoryStoreOptions } from './stores/memory.js';
export { redisStore, type RedisClient } from './stores/redis.js';
export { rateLimitResponse, rateLimitHeaders, type RateLimitResponse, type HeaderMode } from './http/headers.js';
export {
  observe,
  type ObserveOptions,
  type MeterLike,
  type MetricAttributes,
  type DecisionEvent,
} from './limiter/observe.js';
export {
  createDashboard,
  type Dashboard,
  type DashboardOptions,
  type DashboardSnapshot,
  type KeyLookup,
  type KeyState,
} from './dashboard/recorder.js';
export type { KeyDisplay } from './dashboard/key-display.js';
export type { HeavyHitter } from './dashboard/space-saving.js';
export type { SeriesSnapshot, Outcome } from './dashboard/series.js';
export type { StoreSnapshot, Outage } from './dashboard/store-health.js';
export {
  dashboardHandler,
  type DashboardHandler,
  type DashboardHandlerOptions,
  type DashboardRequest,
  type DashboardResponse,
} from './dashboard/handler.js';
