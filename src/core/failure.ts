import { parseDuration, type Duration } from './duration.js';
import { InvalidOptionError, StoreError, toStoreError } from './errors.js';
import type { Limiter } from './limiter.js';
import type { Decision, FailureReason, Policy } from './types.js';

/**
 * What a limiter answers when its store fails or does not reply within `timeout`:
 * - 'allow': admit the request (fail open), the default;
 * - 'deny': refuse it (fail closed), with a retryAfterMs of DENY_RETRY_AFTER_MS;
 * - a limiter, e.g. one on memoryStore() with a stricter policy: ask it instead.
 * Either way the decision carries `reason` and `error`, so failing open is never silent.
 */
export type StoreErrorPolicy = 'allow' | 'deny' | Limiter;

/** Passed to `hooks.storeError` for every failed store call. */
export interface StoreFailure {
  readonly reason: FailureReason;
  readonly error: StoreError;
  /** Failed store calls since the last successful one, this one included. */
  readonly failures: number;
}

/** Passed to `hooks.recover` on the first successful store call after one or more failures. */
export interface StoreRecovery {
  readonly failures: number;
  /** Milliseconds from the first failure to this success, by this process's clock. */
  readonly downForMs: number;
}

/**
 * Called synchronously, for logs and metrics. A hook that throws does not change the decision:
 * its error is reported with process.emitWarning.
 */
export interface FailureHooks {
  storeError?(failure: StoreFailure): void;
  recover?(recovery: StoreRecovery): void;
}

export interface FailureOptions {
  /** The longest a call waits for the store before following `onStoreError` (default '1s'). */
  timeout?: Duration;
  /** What to answer when the store fails or times out (default 'allow'). */
  onStoreError?: StoreErrorPolicy;
  /** Told about store failures and recoveries. Without a storeError hook, each outage's first failure is a process warning. */
  hooks?: FailureHooks;
}

// Long enough that a healthy Redis behind a busy event loop never trips it; short enough that a
// request never hangs for the seconds a client spends reconnecting. Latency-sensitive paths set less.
export const DEFAULT_TIMEOUT_MS = 1_000;
// A denial must say when to come back; the store cannot tell, so: soon, but not in a tight loop.
export const DENY_RETRY_AFTER_MS = 1_000;

type Outcome<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly reason: FailureReason; readonly error: StoreError };

function isLimiter(value: unknown): value is Limiter {
  return typeof value === 'object' && value !== null && typeof (value as Limiter).limit === 'function' && typeof (value as Limiter).peek === 'function';
}

function storeErrorPolicy(value: unknown): StoreErrorPolicy {
  if (value === undefined) return 'allow';
  if (value === 'allow' || value === 'deny' || isLimiter(value)) return value;
  throw new InvalidOptionError('onStoreError', value, "'allow', 'deny' or a fallback limiter from createLimiter()");
}

function failureHooks(value: unknown): FailureHooks {
  if (value === undefined) return {};
  const valid =
    typeof value === 'object' &&
    value !== null &&
    ['storeError', 'recover'].every((name) => {
      const hook = (value as Record<string, unknown>)[name];
      return hook === undefined || typeof hook === 'function';
    });
  if (!valid) throw new InvalidOptionError('hooks', value, 'an object with optional storeError(failure) and recover(recovery) functions');
  return value as FailureHooks;
}

/** Calls a user's hook; its failure must not turn a decision into a rejection. */
function notify<T>(name: string, hook: ((event: T) => void) | undefined, event: T): void {
  if (!hook) return;
  try {
    hook(event);
  } catch (error) {
    process.emitWarning(`sluice: hooks.${name} threw: ${error instanceof Error ? error.message : String(error)}`, 'SluiceHookWarning');
  }
}

/**
 * Settles with the store's answer, or with a timeout once `ms` have passed. The store's promise
 * keeps its handlers after a timeout, so a late rejection is handled and never unhandled.
 */
function withinTimeout<T>(call: () => Promise<T>, ms: number): Promise<Outcome<T>> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ ok: false, reason: 'timeout', error: new StoreError(`no reply within ${ms} ms`) }), ms);
    const settle = (outcome: Outcome<T>) => {
      clearTimeout(timer);
      resolve(outcome);
    };
    let pending: Promise<T>;
    try {
      pending = call();
    } catch (error) {
      pending = Promise.reject(error);
    }
    pending.then(
      (value) => settle({ ok: true, value }),
      (error: unknown) => settle({ ok: false, reason: 'store-error', error: toStoreError(error) }),
    );
  });
}

export interface FailureGuard {
  /** Asks the store within the timeout; if it fails, answers by `onStoreError`, saying why. */
  decide(policies: readonly Policy[], call: () => Promise<Decision>, askFallback: (fallback: Limiter) => Promise<Decision>): Promise<Decision>;
  /** Runs a store call that has no decision to fall back on (reset): within the timeout, or a StoreError. */
  settle<T>(call: () => Promise<T>): Promise<T>;
}

/** A decision made without the store: every policy admits (fail open) or denies (fail closed) alike. */
function withoutStore(policies: readonly Policy[], allowed: boolean, reason: FailureReason, error: StoreError): Decision {
  const waitMs = allowed ? 0 : DENY_RETRY_AFTER_MS;
  const parts = policies.map((p) => ({
    name: p.name,
    algorithm: p.algorithm,
    limit: p.limit,
    windowMs: p.windowMs,
    allowed,
    remaining: allowed ? p.limit : 0,
    resetAfterMs: waitMs,
    retryAfterMs: waitMs,
  }));
  const first = parts[0];
  return { allowed, limit: first?.limit ?? 0, remaining: first?.remaining ?? 0, resetAfterMs: waitMs, retryAfterMs: waitMs, policies: parts, reason, error };
}

/** Reads `timeout`, `onStoreError` and `hooks` from createLimiter's options. */
export function failureGuard(options: Record<string, unknown>): FailureGuard {
  const timeoutMs = options.timeout === undefined ? DEFAULT_TIMEOUT_MS : parseDuration('timeout', options.timeout);
  const onStoreError = storeErrorPolicy(options.onStoreError);
  const hooks = failureHooks(options.hooks);
  let outage: { since: number; failures: number } | undefined;

  async function attempt<T>(call: () => Promise<T>): Promise<Outcome<T>> {
    const outcome = await withinTimeout(call, timeoutMs);
    if (outcome.ok) {
      if (outage) {
        const { since, failures } = outage;
        outage = undefined;
        notify('recover', hooks.recover, { failures, downForMs: Date.now() - since });
      }
      return outcome;
    }
    outage ??= { since: Date.now(), failures: 0 };
    outage.failures++;
    if (hooks.storeError) {
      notify('storeError', hooks.storeError, { reason: outcome.reason, error: outcome.error, failures: outage.failures });
    } else if (outage.failures === 1) {
      const policy = typeof onStoreError === 'string' ? `'${onStoreError}'` : 'the fallback limiter';
      process.emitWarning(`${outcome.error.message} (${outcome.reason}); answering ${policy} until it recovers`, 'SluiceStoreWarning');
    }
    return outcome;
  }

  return {
    async decide(policies, call, askFallback) {
      const outcome = await attempt(call);
      if (outcome.ok) return outcome.value;
      const { reason, error } = outcome;
      if (onStoreError === 'allow' || onStoreError === 'deny') return withoutStore(policies, onStoreError === 'allow', reason, error);
      return { ...(await askFallback(onStoreError)), reason, error };
    },
    async settle(call) {
      const outcome = await attempt(call);
      if (!outcome.ok) throw outcome.error;
      return outcome.value;
    },
  };
}
