import { InvalidArgumentError, InvalidOptionError, SluiceError } from '../core/errors.js';
import { callHook } from '../core/host.js';
import { limitEach, waitThrough } from './built-on-limit.js';
import type { Decision, Limiter, LimitOptions, StoreFailure } from '../core/types.js';
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

/** What a dashboard records of each limit decision, before onDecision is told: no event is made for it. */
export type DecisionRecorder = (key: string, decision: Decision, durationMs: number) => void;

type Decides<D extends Decision> = (key: string, options?: LimitOptions) => Promise<D>;

/** One observed limiter's instruments and hook: it times, counts and tells each call. */
class Observer {
  private instruments: Instruments | undefined;
  /** Set while the global meter loads: what is counted meanwhile waits for it. */
  private loading: Promise<void> | undefined;
  private readonly where: { prefix: string; policy: string; algorithm: string };
  readonly labels: MetricAttributes;
  private readonly byOperation: Record<Timed, MetricAttributes>;

  constructor(
    limiter: Limiter,
    meter: MeterLike | undefined,
    private readonly onDecision: ObserveOptions['onDecision'],
    private readonly includeKeys: boolean,
    private readonly recorder: DecisionRecorder | undefined,
  ) {
    this.instruments = meter === undefined ? undefined : instrumentsOf(meter);
    this.loading =
      meter === undefined
        ? loadGlobalMeter().then((global) => {
            this.instruments = global && instrumentsOf(global);
            this.loading = undefined;
          })
        : undefined;
    const where = { prefix: limiter.prefix, policy: limiter.policy.name, algorithm: limiter.policy.algorithm };
    this.where = where;
    this.labels = { 'sluice.prefix': where.prefix, 'sluice.policy': where.policy, 'sluice.algorithm': where.algorithm };
    this.byOperation = operationLabels(this.labels);
  }

  /**
   * Runs `run` once the meter is there, at once if it is: a store failure, a lease or a limitNow()
   * may come before it has loaded. A meter that fails to load runs nothing.
   */
  private whenReady(run: () => void): void {
    if (this.loading) void this.loading.then(run, () => undefined);
    else run();
  }

  /** Runs `count` with the instruments, once the meter is there (none without a meter). */
  whenLoaded(count: (instruments: Instruments) => void): void {
    this.whenReady(() => this.instruments && count(this.instruments));
  }

  // One async function and one await a decision, no closure or result object: each cost decisions/s on the memory store.
  async decide<D extends Decision>(
    operation: 'limit' | 'peek',
    method: Decides<D>,
    key: string,
    options: LimitOptions | undefined,
  ): Promise<D> {
    const started = performance.now();
    let decision: D;
    try {
      decision = await method(key, options);
    } catch (error) {
      return this.failed(operation, started, error);
    }
    const durationMs = performance.now() - started;
    if (this.loading) await this.loading;
    this.told(operation, key, decision, durationMs);
    return decision;
  }

  /**
   * decide() for limitNow(): the decision at once. While the global meter loads (observe() without
   * a meter, in a process's first moments) it is recorded and told once the meter is there.
   */
  decideNow(method: (key: string, options?: LimitOptions) => Decision, key: string, options?: LimitOptions): Decision {
    const started = performance.now();
    let decision: Decision;
    try {
      decision = method(key, options);
    } catch (error) {
      const durationMs = performance.now() - started;
      if (!isUsageError(error)) this.whenLoaded((instruments) => this.timed(instruments, 'limit', durationMs));
      throw error;
    }
    const durationMs = performance.now() - started;
    this.whenReady(() => this.told('limit', key, decision, durationMs));
    return decision;
  }

  /** Records a decision: its duration and count, then the dashboard's recorder and onDecision. */
  private told(operation: 'limit' | 'peek', key: string, decision: Decision, durationMs: number): void {
    const { instruments } = this;
    if (instruments) {
      this.timed(instruments, operation, durationMs);
      if (operation === 'limit') this.count(instruments, decision);
    }
    if (operation === 'limit' && this.recorder) this.recorder(key, decision, durationMs);
    if (this.onDecision)
      callHook(
        'onDecision',
        this.onDecision,
        decisionEvent(this.where, this.includeKeys ? key : undefined, operation, decision, durationMs),
      );
  }

  async reset(method: (key: string) => Promise<void>, key: string): Promise<void> {
    const started = performance.now();
    try {
      await method(key);
    } catch (error) {
      return this.failed('reset', started, error);
    }
    await this.took('reset', started);
  }

  private count(instruments: Instruments, decision: Decision & DecisionExtras): void {
    (decision.allowed ? instruments.allowed : instruments.denied).add(1, this.labels);
    if (decision.shadow === true && decision.shadowDenied === true) instruments.shadowDenied.add(1, this.labels);
  }

  /** Records the duration of a call begun at `started` that threw `error`, and throws it; misuse goes untimed. */
  private async failed(operation: Timed, started: number, error: unknown): Promise<never> {
    if (isUsageError(error)) throw error;
    await this.took(operation, started);
    throw error;
  }

  private async took(operation: Timed, started: number): Promise<void> {
    const durationMs = performance.now() - started;
    if (this.loading) await this.loading;
    if (this.instruments) this.timed(this.instruments, operation, durationMs);
  }

  private timed(instruments: Instruments, operation: Timed, durationMs: number): void {
    instruments.duration.record(durationMs / 1000, this.byOperation[operation]);
  }
}

/**
 * A limiter that decides exactly as `limiter` does and reports what happens through OpenTelemetry,
 * labelled by prefix, policy and algorithm: counters of allowed, denied and shadow-denied requests,
 * a latency histogram, and the store failures its failure guard reports; and each decision to
 * `onDecision`, for logs. See docs/metrics.md.
 */
export function observe(limiter: Limiter, options: ObserveOptions = {}): Limiter {
  return observeWith(limiter, options, undefined);
}

/** observe(), and each limit decision to `recorder` too (the dashboard's). */
export function observeWith(
  limiter: Limiter,
  options: ObserveOptions,
  recorder: DecisionRecorder | undefined,
): Limiter {
  if (!isLimiter(limiter)) throw new InvalidArgumentError('limiter', limiter, 'a limiter from createLimiter()');
  const o = observeOptions(options);
  const observer = new Observer(limiter, o.meter, o.onDecision, o.includeKeys, recorder);
  const { labels } = observer;
  limiter.watchStore({
    onOutage: ({ operation, reason }: StoreFailure) =>
      observer.whenLoaded((instruments) =>
        instruments.storeErrors.add(1, { ...labels, 'sluice.operation': operation, 'sluice.error.reason': reason }),
      ),
  });
  watchLeaseCounts(limiter, (counter, value) =>
    observer.whenLoaded((instruments) => instruments[counter].add(value, labels)),
  );

  // Bound once here, not a closure per call.
  const limitOf = limiter.limit.bind(limiter);
  const peekOf = limiter.peek.bind(limiter);
  const acquireOf = limiter.acquire.bind(limiter);
  const reserveOf = limiter.reserve.bind(limiter);
  const resetOf = limiter.reset.bind(limiter);
  const limit: Limiter['limit'] = (key, limitOptions) => observer.decide('limit', limitOf, key, limitOptions);
  const limitNowOf = limiter.limitNow?.bind(limiter);
  return {
    ...limiter,
    limit,
    ...(limitNowOf && {
      limitNow: (key: string, limitOptions?: LimitOptions) => observer.decideNow(limitNowOf, key, limitOptions),
    }),
    // Through the observed limit, so each decision they make is counted and timed as one.
    limitMany: (keys, limitOptions) => limitEach(limit, keys, limitOptions),
    waitFor: (key, waitOptions) => waitThrough(limit, key, waitOptions),
    peek: (key, peekOptions) => observer.decide('peek', peekOf, key, peekOptions),
    // A lease is a decision too: counted as one, and returned whole so it can be released.
    acquire: (key, acquireOptions) => observer.decide('limit', acquireOf, key, acquireOptions),
    reserve: (key, reserveOptions) => observer.decide('limit', reserveOf, key, reserveOptions),
    reset: (key) => observer.reset(resetOf, key),
  };
}
