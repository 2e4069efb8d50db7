import { InvalidArgumentError, InvalidOptionError, SluiceError } from '../core/errors.js';
import { callHook } from '../core/host.js';
import { limitEach, waitThrough } from './built-on-limit.js';
import type { Decision, Lease, Limiter, Reservation, StoreFailure } from '../core/types.js';
import { OBSERVE_OLD_NAMES } from '../core/peer-names.js';
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

/** The calls observe() times. */
type Timed = 'limit' | 'peek' | 'reset';

/** What `onDecision` is told of each limit() and peek(). The key is there only with `includeKeys: true`. */
export interface DecisionEvent {
  readonly prefix: string;
  /** The policy's name, as in the RateLimit headers. */
  readonly policy: string;
  readonly algorithm: string;
  readonly operation: 'limit' | 'peek';
  readonly key?: string;
  readonly decision: Decision;
  readonly durationMs: number;
}

export interface ObserveOptions {
  /** Where metrics go. Default: the global MeterProvider's meter, if `@opentelemetry/api` is installed. */
  meter?: MeterLike;
  /** Called after every limit() and peek() with the decision. */
  onDecision?: (event: DecisionEvent) => void;
  /** Put the client's key in events. Default false: keys may be user ids or IP addresses. */
  includeKeys?: boolean;
}

/** Fields a decision carries in shadow mode: read defensively, all optional. */
interface DecisionExtras {
  readonly shadow?: unknown;
  readonly shadowDenied?: unknown;
}

interface Instruments {
  allowed: ReturnType<MeterLike['createCounter']>;
  denied: ReturnType<MeterLike['createCounter']>;
  shadowDenied: ReturnType<MeterLike['createCounter']>;
  storeErrors: ReturnType<MeterLike['createCounter']>;
  leasesTaken: ReturnType<MeterLike['createCounter']>;
  leaseUnitsReturned: ReturnType<MeterLike['createCounter']>;
  leaseUnitsExpired: ReturnType<MeterLike['createCounter']>;
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
      description: "Store calls that failed or timed out, as the limiter's failure guard reports them",
    }),
    leasesTaken: meter.createCounter('sluice.leases.taken', {
      description: 'Quota leases taken from the store (a limiter with lease)',
    }),
    leaseUnitsReturned: meter.createCounter('sluice.leases.units_returned', {
      description: 'Units of quota leases given back to the store unused',
    }),
    leaseUnitsExpired: meter.createCounter('sluice.leases.units_expired', {
      description: 'Units of quota leases never used and not given back: their time passed, or the store failed',
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
    typeof limiter.watchStore === 'function' &&
    typeof limiter.policy === 'object'
  );
}

/** Misuse (a bad key or cost) is the caller's mistake: not a latency sample. */
function isUsageError(error: unknown): boolean {
  return error instanceof SluiceError && error.code !== 'SLUICE_STORE_ERROR';
}

/** The labels of each timed operation's durations. */
function operationLabels(labels: MetricAttributes): Record<Timed, MetricAttributes> {
  return {
    limit: { ...labels, 'sluice.operation': 'limit' },
    peek: { ...labels, 'sluice.operation': 'peek' },
    reset: { ...labels, 'sluice.operation': 'reset' },
  };
}

/** observe()'s options, checked. */
function observeOptions(options: unknown): {
  meter: MeterLike | undefined;
  onDecision: ObserveOptions['onDecision'];
  includeKeys: boolean;
} {
  const o = optionsObject('observe', options, ['meter', 'onDecision', 'includeKeys'], OBSERVE_OLD_NAMES);
  if (o.meter !== undefined && !isMeter(o.meter))
    throw new InvalidOptionError('meter', o.meter, 'an OpenTelemetry Meter (with createCounter and createHistogram)');
  if (o.includeKeys !== undefined && typeof o.includeKeys !== 'boolean')
    throw new InvalidOptionError('includeKeys', o.includeKeys, 'true or false');
  if (o.onDecision !== undefined && typeof o.onDecision !== 'function')
    throw new InvalidOptionError('onDecision', o.onDecision, 'a function');
  return {
    meter: o.meter,
    onDecision: o.onDecision as ObserveOptions['onDecision'],
    includeKeys: o.includeKeys === true,
  };
}

type LeaseCounter = 'leasesTaken' | 'leaseUnitsReturned' | 'leaseUnitsExpired';

/** Counts a leased limiter's quota leases (sluice.leases.*) with `count`. */
function watchLeaseCounts(limiter: Limiter, count: (counter: LeaseCounter, value: number) => void): void {
  limiter.watchLeases?.({
    onTaken: () => count('leasesTaken', 1),
    onReturned: (units) => count('leaseUnitsReturned', units),
    onExpired: (units) => count('leaseUnitsExpired', units),
  });
}

/** onDecision's event, with the key when `key` is given. Written out, not spread: one shape, no copying. */
function decisionEvent(
  { prefix, policy, algorithm }: { prefix: string; policy: string; algorithm: string },
  key: string | undefined,
  operation: 'limit' | 'peek',
  decision: Decision,
  durationMs: number,
): DecisionEvent {
  return key !== undefined
    ? { prefix, policy, algorithm, operation, key, decision, durationMs }
    : { prefix, policy, algorithm, operation, decision, durationMs };
}

/**
 * A limiter that decides exactly as `limiter` does and reports what happens through OpenTelemetry,
 * labelled by prefix, policy and algorithm: counters of allowed, denied and shadow-denied requests,
 * a latency histogram, and the store failures its failure guard reports; and each decision to
 * `onDecision`, for logs. See docs/metrics.md.
 */
export function observe(limiter: Limiter, options: ObserveOptions = {}): Limiter {
  if (!isLimiter(limiter)) throw new InvalidArgumentError('limiter', limiter, 'a limiter from createLimiter()');
  const o = observeOptions(options);
  const { onDecision, includeKeys } = o;

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
  const byOperation = operationLabels(labels);

  // Counted once the meter is there: a store failure or a lease may come before it has loaded.
  const whenLoaded = (count: () => void) => (loading ? void loading.then(count) : count());
  limiter.watchStore({
    onOutage: ({ operation, reason }: StoreFailure) =>
      whenLoaded(() =>
        instruments?.storeErrors.add(1, { ...labels, 'sluice.operation': operation, 'sluice.error.reason': reason }),
      ),
  });
  watchLeaseCounts(limiter, (counter, value) => whenLoaded(() => instruments?.[counter].add(value, labels)));

  /** Runs one call and times it; misuse passes through untimed. */
  async function timed<T>(operation: Timed, call: () => Promise<T>): Promise<{ result: T; durationMs: number }> {
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
    if ('error' in outcome) throw outcome.error;
    return { result: outcome.result, durationMs };
  }

  async function decide(operation: 'limit' | 'peek', key: string, call: () => Promise<Decision>): Promise<Decision> {
    const { result: decision, durationMs } = await timed(operation, call);
    const extras = decision as Decision & DecisionExtras;
    if (operation === 'limit' && instruments) {
      (decision.allowed ? instruments.allowed : instruments.denied).add(1, labels);
      if (extras.shadow === true && extras.shadowDenied === true) instruments.shadowDenied.add(1, labels);
    }
    callHook('onDecision', onDecision, () =>
      decisionEvent(where, includeKeys ? key : undefined, operation, decision, durationMs),
    );
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
      await timed('reset', () => limiter.reset(key));
    },
  };
}
