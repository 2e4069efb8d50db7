import { parseDuration, type Duration } from '../core/duration.js';
import { InvalidArgumentError, InvalidOptionError } from '../core/errors.js';
import { MAX_TIMER_MS } from '../core/host.js';
import type { Limiter, StoreWatcher } from '../core/types.js';
import { isEnginePolicy, type EnginePolicy } from '../engine/algorithm.js';

/**
 * What a limiter answers when its store fails or does not reply within `timeout`:
 * - 'allow': admit the request (fail open), the default;
 * - 'deny': refuse it (fail closed), with a retryAfterMs of DENY_RETRY_AFTER_MS;
 * - a limiter, e.g. one on memoryStore() with a stricter policy: ask it instead.
 * Either way the decision carries `reason` and `error`, so failing open is never silent.
 */
export type StoreErrorPolicy = 'allow' | 'deny' | Limiter;

export interface FailureOptions extends StoreWatcher {
  /** The longest a call waits for the store before following `onStoreError` (default '1s'). */
  timeout?: Duration;
  /** What to answer when the store fails or times out (default 'allow'). */
  onStoreError?: StoreErrorPolicy;
}

// Long enough that a healthy Redis behind a busy event loop never trips it; short enough that a
// request never hangs for the seconds a client spends reconnecting. Latency-sensitive paths set less.
export const DEFAULT_TIMEOUT_MS = 1_000;
// A denial must say when to come back; the store cannot tell, so: soon, but not in a tight loop.
export const DENY_RETRY_AFTER_MS = 1_000;

/** The `timeout` option in ms: at most the longest a timer waits. */
export function timeoutOption(value: unknown): number {
  const timeoutMs = value === undefined ? DEFAULT_TIMEOUT_MS : parseDuration('timeout', value);
  if (timeoutMs > MAX_TIMER_MS)
    throw new InvalidOptionError(
      'timeout',
      value,
      `a duration of at most ${MAX_TIMER_MS} ms (about 24.8 days), the longest a timer waits`,
    );
  return timeoutMs;
}

function isLimiter(value: unknown): value is Limiter {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Limiter).limit === 'function' &&
    typeof (value as Limiter).peek === 'function'
  );
}

/** The `onStoreError` option of a limiter of `own` policies. */
export function storeErrorPolicy(value: unknown, own: readonly EnginePolicy[]): StoreErrorPolicy {
  if (value === undefined) return 'allow';
  if (value === 'allow' || value === 'deny') return value;
  if (!isLimiter(value))
    throw new InvalidOptionError('onStoreError', value, "'allow', 'deny' or a fallback limiter from createLimiter()");
  if (Array.isArray(value.policies) && value.policies.every(isEnginePolicy)) fitsAsFallback(value, own);
  return value;
}

/**
 * A fallback is asked only while the store fails, with the call's own cost by unit and method: a
 * call it could not take (a unit it does not count, a lease it cannot lend, a slot it only lends
 * by lease) would fail then, in an outage, so such a fallback is refused now.
 */
function fitsAsFallback(fallback: Limiter, own: readonly EnginePolicy[]): void {
  const theirs = fallback.policies as readonly EnginePolicy[];
  const counted = new Set(theirs.map((p) => p.counts));
  const missing = [...new Set(own.map((p) => p.counts))].filter((unit) => !counted.has(unit));
  if (missing.length > 0)
    throw new InvalidOptionError(
      'onStoreError',
      fallback,
      `a fallback limiter counting every unit this limiter counts; it does not count ${missing.join(', ')}`,
    );
  const leases = (policies: readonly EnginePolicy[]) => policies.some((p) => p.kind.leases === true);
  if (leases(own) !== leases(theirs))
    throw new InvalidOptionError(
      'onStoreError',
      fallback,
      leases(own)
        ? 'a fallback limiter with a concurrency policy, to lend the leases acquire() asks for'
        : 'a fallback limiter without a concurrency policy: limit() cannot take its slots',
    );
}

/** A watcher's callbacks, checked; `Invalid` names a bad one as an option or as an argument. */
export function storeWatcher(
  value: object,
  Invalid: typeof InvalidOptionError | typeof InvalidArgumentError,
  path = '',
): StoreWatcher {
  const watcher = value as Record<string, unknown>;
  for (const name of ['onOutage', 'onRecovery'] as const) {
    if (watcher[name] !== undefined && typeof watcher[name] !== 'function')
      throw new Invalid(`${path}${name}`, watcher[name], 'a function');
  }
  return watcher;
}
