import { parseDuration, type Duration } from '../core/duration.js';
import { InvalidOptionError, StoreError, StoreTimeoutError, toStoreError } from '../core/errors.js';
import { holdProcessOpen, timersOutliveRequests, warn } from '../core/host.js';
import type { Decision, FailureReason, Limiter, Policy } from '../core/types.js';
import { policyDecision } from '../core/binding.js';
import { nestedOptions } from '../core/validate.js';

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
 * its error is reported with process.emitWarning (the console where there is no process).
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
// Node runs timers by a clock of whole ms, so one may fire up to 1 ms before performance.now()
// reaches its time. A call due that soon is answered then: waiting for the sliver would cost
// another turn of the event loop, tens of ms under load. So a store call may count only until
// this long before its deadline (see attempt), never after the guard may have answered it.
const TIMER_SLACK_MS = 1;

function isLimiter(value: unknown): value is Limiter {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Limiter).limit === 'function' &&
    typeof (value as Limiter).peek === 'function'
  );
}

function storeErrorPolicy(value: unknown): StoreErrorPolicy {
  if (value === undefined) return 'allow';
  if (value === 'allow' || value === 'deny' || isLimiter(value)) return value;
  throw new InvalidOptionError('onStoreError', value, "'allow', 'deny' or a fallback limiter from createLimiter()");
}

const HOOKS = ['storeError', 'recover'];

function failureHooks(value: unknown): FailureHooks {
  if (value === undefined) return {};
  const hooks = nestedOptions('hooks', value, HOOKS);
  if (!HOOKS.every((name) => hooks[name] === undefined || typeof hooks[name] === 'function'))
    throw new InvalidOptionError(
      'hooks',
      value,
      'an object with optional storeError(failure) and recover(recovery) functions',
    );
  return value as FailureHooks;
}

/** Calls a user's hook as a method (it may use `this`); its failure must not turn a decision into a rejection. */
function notify(name: string, call: () => void): void {
  try {
    call();
  } catch (error) {
    warn(`sluice: hooks.${name} threw: ${error instanceof Error ? error.message : String(error)}`, {
      type: 'SluiceHookWarning',
    });
  }
}

/** A store call waiting for its answer or its deadline, whichever comes first. */
interface Pending {
  readonly due: number;
  readonly onTimeout: () => void;
  done: boolean;
  /** Its own timer, where timers die with their request (see timersOutliveRequests). */
  timer?: ReturnType<typeof setTimeout>;
}

/**
 * The deadlines of one guard's store calls. They all wait `ms`, so they fall due in the order they
 * were set: one timer, armed for the earliest, serves them all, instead of a timer per call. It
 * fires when that call is due, as a timer of its own would, and lapses when nothing waits.
 */
class Deadlines {
  private queue: Pending[] = [];
  private head = 0;
  private waiting = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly ms: number) {}

  add(onTimeout: () => void): Pending {
    if (!timersOutliveRequests) {
      // A Worker drops a timer when the request that armed it ends: each call arms its own, in its
      // own request, the one kind of timer that serves it there.
      const pending: Pending = { due: performance.now() + this.ms, onTimeout, done: false };
      pending.timer = setTimeout(() => {
        if (pending.done) return;
        pending.done = true;
        onTimeout();
      }, this.ms);
      return pending;
    }
    if (this.waiting === 0) {
      this.queue = [];
      this.head = 0;
      // Calls that settle at once (the memory store) would arm and clear a timer each: one timer
      // stays armed instead, holding the process open only while a call waits.
      holdProcessOpen(this.timer, true);
    }
    const pending: Pending = { due: performance.now() + this.ms, onTimeout, done: false };
    this.queue.push(pending);
    this.waiting++;
    this.timer ??= setTimeout(this.fire, this.ms);
    return pending;
  }

  /** Marks a call answered; false if its deadline passed first (its answer is too late to count). */
  finish(pending: Pending): boolean {
    if (pending.done) return false;
    pending.done = true;
    if (pending.timer !== undefined) clearTimeout(pending.timer);
    else if (--this.waiting === 0) holdProcessOpen(this.timer, false);
    return true;
  }

  private readonly fire = (): void => {
    this.timer = undefined;
    const now = performance.now();
    const expired: Pending[] = [];
    for (; this.head < this.queue.length; this.head++) {
      const pending = this.queue[this.head] as Pending;
      if (pending.done) continue;
      if (pending.due > now + TIMER_SLACK_MS) break;
      pending.done = true;
      this.waiting--;
      expired.push(pending);
    }
    // Answered calls are dropped from the front once they make up most of the queue.
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    const next = this.queue[this.head];
    if (this.waiting > 0 && next) this.timer = setTimeout(this.fire, Math.max(1, Math.ceil(next.due - now)));
    else {
      this.queue = [];
      this.head = 0;
    }
    // Last, as they may call back into the limiter (a hook, a fallback limiter) and add deadlines.
    for (const pending of expired) pending.onTimeout();
  };
}

/** A store call, told how long it may still take effect: after that its caller has moved on. */
export type StoreCall<T> = (validForMs: number) => Promise<T>;

export interface FailureGuard {
  /** Asks the store within the timeout; if it fails, answers by `onStoreError`, saying why. */
  decide(
    policies: readonly Policy[],
    call: StoreCall<Decision>,
    askFallback: (fallback: Limiter) => Promise<Decision>,
  ): Promise<Decision>;
  /** Runs a store call that has no decision to fall back on (reset): within the timeout, or a StoreError. */
  settle<T>(call: StoreCall<T>): Promise<T>;
}

/** A decision made without the store: every policy admits (fail open) or denies (fail closed) alike. */
function withoutStore(
  policies: readonly Policy[],
  allowed: boolean,
  reason: FailureReason,
  error: StoreError,
): Decision {
  const waitMs = allowed ? 0 : DENY_RETRY_AFTER_MS;
  const parts = policies.map((p) => policyDecision(p, allowed, allowed ? p.limit : 0, waitMs, waitMs));
  const first = parts[0];
  return {
    allowed,
    limit: first?.limit ?? 0,
    remaining: first?.remaining ?? 0,
    resetAfterMs: waitMs,
    retryAfterMs: waitMs,
    policies: parts,
    reason,
    error,
  };
}

/** Reads `timeout`, `onStoreError` and `hooks` from createLimiter's options. */
export function failureGuard(options: Record<string, unknown>): FailureGuard {
  const timeoutMs = options.timeout === undefined ? DEFAULT_TIMEOUT_MS : parseDuration('timeout', options.timeout);
  const onStoreError = storeErrorPolicy(options.onStoreError);
  const hooks = failureHooks(options.hooks);
  let outage: { since: number; failures: number } | undefined;
  const deadlines = new Deadlines(timeoutMs);

  function recovered(): void {
    if (!outage) return;
    const { since, failures } = outage;
    outage = undefined;
    notify('recover', () => hooks.recover?.({ failures, downForMs: Date.now() - since }));
  }

  function failed(reason: FailureReason, error: StoreError): void {
    outage ??= { since: Date.now(), failures: 0 };
    outage.failures++;
    if (hooks.storeError) {
      const failure = { reason, error, failures: outage.failures };
      notify('storeError', () => hooks.storeError?.(failure));
    } else if (outage.failures === 1) {
      const policy = typeof onStoreError === 'string' ? `'${onStoreError}'` : 'the fallback limiter';
      warn(`${error.message} (${reason}); answering ${policy} until it recovers`, { type: 'SluiceStoreWarning' });
    }
  }

  /**
   * Runs a store call and reports, once, its value or why it failed: an error, or no reply within
   * the timeout. A reply after the timeout is ignored, and a late rejection is handled, never
   * unhandled; the call is told the timeout, so that it counts nothing if it runs after it.
   */
  function attempt<T>(
    call: StoreCall<T>,
    ok: (value: T) => void,
    fail: (reason: FailureReason, error: StoreError) => void,
  ): void {
    const pending = deadlines.add(() => {
      const error = new StoreTimeoutError(`no reply within ${timeoutMs} ms`);
      failed('timeout', error);
      fail('timeout', error);
    });
    let answer: Promise<T>;
    try {
      answer = call(timeoutMs - TIMER_SLACK_MS);
    } catch (error) {
      answer = Promise.reject(error);
    }
    answer.then(
      (value) => {
        if (!deadlines.finish(pending)) return;
        recovered();
        ok(value);
      },
      (raw: unknown) => {
        if (!deadlines.finish(pending)) return;
        const error = toStoreError(raw);
        const reason = error instanceof StoreTimeoutError ? 'timeout' : 'store-error';
        failed(reason, error);
        fail(reason, error);
      },
    );
  }

  return {
    decide(policies, call, askFallback) {
      return new Promise((resolve, reject) => {
        attempt(call, resolve, (reason, error) => {
          if (onStoreError === 'allow' || onStoreError === 'deny')
            resolve(withoutStore(policies, onStoreError === 'allow', reason, error));
          else askFallback(onStoreError).then((decision) => resolve({ ...decision, reason, error }), reject);
        });
      });
    },
    settle(call) {
      return new Promise((resolve, reject) => attempt(call, resolve, (_reason, error) => reject(error)));
    },
  };
}
