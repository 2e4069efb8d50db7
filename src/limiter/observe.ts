import { InvalidArgumentError, InvalidOptionError, SluiceError } from '../core/errors.js';
import { warn } from '../core/host.js';
import { limitEach, waitThrough } from './limiter.js';
import type { Decision, Lease, Limiter, Reservation } from '../core/types.js';
import { optionsObject } from '../core/validate.js';

/** Metric attributes: what every series is labelled with. */
export type MetricAttributes = Readonly<Record<string, string>>;

/**
 * The part of an OpenTelemetry `Meter` that observe() uses: a Meter from `@opentelemetry/api`
 * (`metrics.getMeter('my-app')` or `meterProvider.getMeter(...)`) fits as it is.
 */
export interface MeterLike {
  createCounter(
    name: string,
    options?: { description?: string; unit?: string },
  ): { add(value: number, attributes?: MetricAttributes): void };
  createHistogram(
    name: string,
    options?: { description?: string; unit?: string; advice?: { explicitBucketBoundaries?: number[] } },
  ): { record(value: number, attributes?: MetricAttributes): void };
}

export type Operation = 'limit' | 'peek' | 'reset';

/** What every event says about where it happened. The key is there only with `includeKeys: true`. */
export interface LimiterEvent {
  readonly prefix: string;
  /** The policy's name, as in the RateLimit headers. */
  readonly policy: string;
  readonly algorithm: string;
  readonly operation: Operation;
  readonly key?: string;
}

export interface DecisionEvent extends LimiterEvent {
  readonly operation: 'limit' | 'peek';
  readonly decision: Decision;
  readonly durationMs: number;
}

/** An error without its stack or attached data: ioredis errors, for one, carry the command's keys. */
export interface ErrorSummary {
  readonly name: string;
  readonly message: string;
  readonly code?: string;
}

export interface StoreErrorEvent extends LimiterEvent {
  /** 'rejected': the call rejected; 'store-error' or 'timeout': it was answered by a decision taken without the store. */
  readonly reason: string;
  readonly error: ErrorSummary;
  /** The error itself, only with `includeKeys: true`. */
  readonly cause?: unknown;
  /** The decision the call resolved with despite the failure, if it did. */
  readonly decision?: Decision;
  readonly durationMs: number;
}

export interface RecoverEvent extends LimiterEvent {
  /** How many calls in a row failed before this one succeeded. */
  readonly failures: number;
  /** Milliseconds from the first of those failures to this success. */
  readonly downForMs: number;
}

export interface ObserveOptions {
  /** Where metrics go. Default: the global MeterProvider's meter, if `@opentelemetry/api` is installed. */
  meter?: MeterLike;
  /** Called after every limit() and peek() with the decision. */
  onDecision?: (event: DecisionEvent) => void;
  /** Called when a call fails in the store: it rejects, or resolves with a decision marked store-error or timeout. */
  onStoreError?: (event: StoreErrorEvent) => void;
  /** Called on the first success after one or more store errors. */
  onRecover?: (event: RecoverEvent) => void;
  /** Put the client's key (and the raw error) in events. Default false: keys may be user ids or IP addresses. */
  includeKeys?: boolean;
}

/** Fields a decision carries in shadow mode or when a store failure was answered: read defensively, all optional. */
interface DecisionExtras {
  readonly shadow?: unknown;
  readonly shadowDenied?: unknown;
  readonly reason?: unknown;
  readonly error?: unknown;
}

const FAILURE_REASONS = new Set(['store-error', 'timeout']);

interface Instruments {
  allowed: ReturnType<MeterLike['createCounter']>;
  denied: ReturnType<MeterLike['createCounter']>;
  shadowDenied: ReturnType<MeterLike['createCounter']>;
  storeErrors: ReturnType<MeterLike['createCounter']>;
  duration: ReturnType<MeterLike['createHistogram']>;
}

function instrumentsOf(meter: MeterLike): Instruments {
  return {
    allowed: meter.createCounter('sluice.requests.allowed', {
      description: 'Requests admitted by limit(), shadow-denied ones included',
    }),
    denied: meter.createCounter('sluice.requests.denied', { description: 'Requests denied by limit()' }),
    shadowDenied: meter.createCounter('sluice.requests.shadow_denied', {
      description: 'Requests admitted in shadow mode that the policy would have denied',
    }),
    storeErrors: meter.createCounter('sluice.store.errors', {
      description: 'Calls that failed in the store: rejected, or answered without it',
    }),
    duration: meter.createHistogram('sluice.operation.duration', {
      description: 'How long limit(), peek() and reset() took, store round trip included',
      unit: 's',
      // A Redis round trip takes a fraction of a millisecond to a few; the SDK's default buckets start at 5 (seconds).
      advice: {
        explicitBucketBoundaries: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      },
    }),
  };
}

// Loaded once per process and only when a limiter is observed without a meter; absent, metrics are off.
let globalMeter: Promise<MeterLike | undefined> | undefined;
function loadGlobalMeter(): Promise<MeterLike | undefined> {
  globalMeter ??= import('@opentelemetry/api').then(
    (api) => api.metrics.getMeter('sluice'),
    () => undefined,
  );
  return globalMeter;
}

function isMeter(value: unknown): value is MeterLike {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as MeterLike).createCounter === 'function' &&
    typeof (value as MeterLike).createHistogram === 'function'
  );
}

function isLimiter(value: unknown): value is Limiter {
  const limiter = value as Limiter;
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof limiter.limit === 'function' &&
    typeof limiter.peek === 'function' &&
    typeof limiter.reset === 'function' &&
    typeof limiter.policy === 'object'
  );
}

function optionalFunction<T>(option: string, value: unknown): T | undefined {
  if (value !== undefined && typeof value !== 'function') throw new InvalidOptionError(option, value, 'a function');
  return value as T | undefined;
}

function summary(error: unknown): ErrorSummary {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error) };
  const code = (error as { code?: unknown }).code;
  return { name: error.name, message: error.message, ...(typeof code === 'string' ? { code } : {}) };
}

/** Misuse (a bad key or cost) is the caller's mistake: not a store error, not a latency sample. */
function isUsageError(error: unknown): boolean {
  return error instanceof SluiceError && error.code !== 'SLUICE_STORE_ERROR';
}

/**
 * Calls a user's hook with the event `build` makes (only when there is a hook: no cost otherwise).
 * A hook that throws must not turn a decision into a failure, so its error becomes a warning.
 */
function emit<E>(hook: ((event: E) => void) | undefined, build: () => E): void {
  if (!hook) return;
  try {
    hook(build());
  } catch (error) {
    warn(`an observe() hook threw: ${error instanceof Error ? error.message : String(error)}`, {
      code: 'SLUICE_HOOK_FAILED',
    });
  }
}

/**
 * A limiter that decides exactly as `limiter` does and reports what happens: counters of allowed,
 * denied, shadow-denied requests and store errors and a latency histogram through OpenTelemetry,
 * labelled by prefix, policy and algorithm; and hooks for logs. See docs/metrics.md.
 */
export function observe(limiter: Limiter, options: ObserveOptions = {}): Limiter {
  if (!isLimiter(limiter)) throw new InvalidArgumentError('limiter', limiter, 'a limiter from createLimiter()');
  const o = optionsObject('observe', options, ['meter', 'onDecision', 'onStoreError', 'onRecover', 'includeKeys']);
  if (o.meter !== undefined && !isMeter(o.meter))
    throw new InvalidOptionError('meter', o.meter, 'an OpenTelemetry Meter (with createCounter and createHistogram)');
  if (o.includeKeys !== undefined && typeof o.includeKeys !== 'boolean')
    throw new InvalidOptionError('includeKeys', o.includeKeys, 'true or false');
  const onDecision = optionalFunction<ObserveOptions['onDecision']>('onDecision', o.onDecision);
  const onStoreError = optionalFunction<ObserveOptions['onStoreError']>('onStoreError', o.onStoreError);
  const onRecover = optionalFunction<ObserveOptions['onRecover']>('onRecover', o.onRecover);
  const includeKeys = o.includeKeys === true;

  let instruments = o.meter === undefined ? undefined : instrumentsOf(o.meter);
  let loading =
    o.meter === undefined
      ? loadGlobalMeter().then((meter) => {
          instruments = meter && instrumentsOf(meter);
          loading = undefined;
        })
      : undefined;

  const where = { prefix: limiter.prefix, policy: limiter.policy.name, algorithm: limiter.policy.algorithm };
  const labels = { 'sluice.prefix': where.prefix, 'sluice.policy': where.policy, 'sluice.algorithm': where.algorithm };
  const byOperation: Record<Operation, MetricAttributes> = {
    limit: { ...labels, 'sluice.operation': 'limit' },
    peek: { ...labels, 'sluice.operation': 'peek' },
    reset: { ...labels, 'sluice.operation': 'reset' },
  };
  const eventBase = (operation: Operation, key: string): LimiterEvent => ({
    ...where,
    operation,
    ...(includeKeys ? { key } : {}),
  });

  let failuresInARow = 0;
  let failingSince = 0;

  function storeError(
    operation: Operation,
    key: string,
    durationMs: number,
    reason: string,
    error: unknown,
    decision?: Decision,
  ): void {
    if (failuresInARow++ === 0) failingSince = Date.now();
    instruments?.storeErrors.add(1, { ...byOperation[operation], 'sluice.error.reason': reason });
    emit(onStoreError, () => ({
      ...eventBase(operation, key),
      reason,
      error: summary(error),
      ...(includeKeys ? { cause: error } : {}),
      ...(decision ? { decision } : {}),
      durationMs,
    }));
  }

  function success(operation: Operation, key: string): void {
    if (failuresInARow === 0) return;
    const failures = failuresInARow;
    failuresInARow = 0;
    emit(onRecover, () => ({ ...eventBase(operation, key), failures, downForMs: Date.now() - failingSince }));
  }

  /** Runs one call, timing it and reporting a rejection as a store error; misuse passes through untouched. */
  async function timed<T>(
    operation: Operation,
    key: string,
    call: () => Promise<T>,
  ): Promise<{ result: T; durationMs: number }> {
    const started = performance.now();
    let outcome: { result: T } | { error: unknown };
    try {
      outcome = { result: await call() };
    } catch (error) {
      if (isUsageError(error)) throw error;
      outcome = { error };
    }
    const durationMs = performance.now() - started;
    if (loading) await loading;
    instruments?.duration.record(durationMs / 1000, byOperation[operation]);
    if ('error' in outcome) {
      storeError(operation, key, durationMs, 'rejected', outcome.error);
      throw outcome.error;
    }
    return { result: outcome.result, durationMs };
  }

  async function decide(operation: 'limit' | 'peek', key: string, call: () => Promise<Decision>): Promise<Decision> {
    const { result: decision, durationMs } = await timed(operation, key, call);
    const extras = decision as Decision & DecisionExtras;
    if (operation === 'limit' && instruments) {
      (decision.allowed ? instruments.allowed : instruments.denied).add(1, labels);
      if (extras.shadow === true && extras.shadowDenied === true) instruments.shadowDenied.add(1, labels);
    }
    if (typeof extras.reason === 'string' && FAILURE_REASONS.has(extras.reason)) {
      storeError(
        operation,
        key,
        durationMs,
        extras.reason,
        extras.error ?? `the store failed (${extras.reason})`,
        decision,
      );
    } else {
      success(operation, key);
    }
    emit(onDecision, () => ({ ...eventBase(operation, key), operation, decision, durationMs }));
    return decision;
  }

  const limit: Limiter['limit'] = (key, limitOptions) => decide('limit', key, () => limiter.limit(key, limitOptions));
  return {
    ...limiter,
    limit,
    // Through the observed limit, so each decision they make is counted and timed as one.
    limitMany: (keys, limitOptions) => limitEach(limit, keys, limitOptions),
    waitFor: (key, waitOptions) => waitThrough(limit, key, waitOptions),
    peek: (key, peekOptions) => decide('peek', key, () => limiter.peek(key, peekOptions)),
    // A lease is a decision too: counted as one, and returned whole so it can be released.
    acquire: (key, acquireOptions) =>
      decide('limit', key, () => limiter.acquire(key, acquireOptions)) as Promise<Lease>,
    reserve: (key, reserveOptions) =>
      decide('limit', key, () => limiter.reserve(key, reserveOptions)) as Promise<Reservation>,
    async reset(key) {
      await timed('reset', key, () => limiter.reset(key));
      success('reset', key);
    },
  };
}
