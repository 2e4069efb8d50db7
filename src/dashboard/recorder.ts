import { formatDuration, parseDuration, type Duration } from '../core/duration.js';
import { InvalidArgumentError, InvalidOptionError, messageOf } from '../core/errors.js';
import type { Decision, Limiter, PolicyDecision, StoreWatcher } from '../core/types.js';
import { optionsObject, positiveInteger } from '../core/validate.js';
import { observeWith, type DecisionEvent, type ObserveOptions } from '../limiter/observe.js';
import { keyShower, validKeyDisplay, type KeyDisplay } from './key-display.js';
import { EXACT_PER_SECOND, SAMPLE_ONE_IN } from './key-summary.js';
import { Series, type Outcome, type SeriesSnapshot } from './series.js';
import { StoreHealth, type StoreSnapshot } from './store-health.js';

export interface DashboardOptions {
  /** How keys are shown (personal data): 'plain' (default), 'truncate' or 'hash'; see KeyDisplay. */
  keys?: KeyDisplay;
  /** Counters in each Space-Saving summary of keys, per rule (default 1000): counts overestimate by at most N / topKeys. */
  topKeys?: number;
  /** How far back the per-second chart goes (default '5m', at most '1h'). */
  history?: Duration;
  /** The most rules or policies counted apart (default 100); decisions of more are counted under "(other)". */
  maxSeries?: number;
}

/** A dashboard's state at one moment, as its JSON endpoint serves it (`sluice top` reads it). */
export interface DashboardSnapshot {
  readonly version: 1;
  /** ms since the epoch. */
  readonly now: number;
  readonly startedAt: number;
  /** Seconds in each series' perSecond. */
  readonly seconds: number;
  readonly keys: KeyDisplay;
  /** Counters in each summary: its bound is at most N / capacity. */
  readonly capacity: number;
  /** Each series' summaries count its first `exactPerSecond` decisions a second, then one in `oneIn`, standing for `oneIn`. */
  readonly sampling: { readonly exactPerSecond: number; readonly oneIn: number };
  /** Per rule or policy, its keys shown as `keys` says. */
  readonly series: readonly SeriesSnapshot[];
  readonly store: StoreSnapshot;
  /** The rules loaded, one a line. */
  readonly rules: string;
}

/** A key's state under one rule or policy, read with peek (which writes nothing). */
export interface KeyState {
  readonly name: string;
  readonly decision?: Pick<Decision, 'allowed' | 'limit' | 'remaining' | 'resetAfterMs' | 'retryAfterMs'> & {
    readonly blockedForMs?: number;
    /** Set when the store failed: the answer is the failure policy's, not the key's state. */
    readonly reason?: Decision['reason'];
    readonly policies: readonly PolicyDecision[];
  };
  /** Why it could not be read. */
  readonly error?: string;
}

export interface KeyLookup {
  /** The key as the dashboard shows it. */
  readonly key: string;
  readonly states: readonly KeyState[];
}

/** The live dashboard's recorder: what it shows is what the limiters it observes report. */
export interface Dashboard {
  /**
   * `limiter`, observed (as observe() does, with its options) and recorded here: its decisions,
   * latency and store outages. Its key lookup peeks through `limiter`.
   */
  observe(limiter: Limiter, options?: ObserveOptions): Limiter;
  /** Records one event of an observe() of yours: pass `{ includeKeys: true, onDecision: dashboard.record }`. */
  readonly record: (event: DecisionEvent) => void;
  /** For limiter.watchStore(), with record: the store's outages. */
  readonly watcher: StoreWatcher;
  snapshot(top?: number): DashboardSnapshot;
  /** A key's state under every limiter observed, read with peek. */
  lookup(key: string): Promise<KeyLookup>;
}

const OTHER = '(other)';
const MOST_HISTORY_MS = 3_600_000;
/** What peek answers, as a lookup shows it. */
const stateOf = (decision: Decision): NonNullable<KeyState['decision']> => {
  const { allowed, limit, remaining, resetAfterMs, retryAfterMs, blockedForMs, reason, policies } = decision;
  return {
    allowed,
    limit,
    remaining,
    resetAfterMs,
    retryAfterMs,
    ...(blockedForMs === undefined ? {} : { blockedForMs }),
    ...(reason === undefined ? {} : { reason }),
    policies,
  };
};

/** A limit decision's outcome, each request in one class. */
export function outcomeOf(decision: Decision): Outcome {
  return !decision.allowed ? 'denied' : decision.shadowDenied === true ? 'shadowDenied' : 'admitted';
}

/** The recorder behind createDashboard; the service feeds it through its own parts (src/serve/dashboard.ts). */
export class Recorder implements Dashboard {
  readonly keys: KeyDisplay;
  readonly capacity: number;
  private readonly seconds: number;
  private readonly maxSeries: number;
  private readonly series = new Map<string, Series>();
  private readonly show: (key: string) => string;
  readonly health = new StoreHealth(() => Date.now());
  readonly watcher: StoreWatcher = this.health.watcher;
  private readonly startedAt = Date.now();
  /** The observed limiters, by series name, for lookups and the rules shown. */
  private readonly limiters = new Map<string, Limiter>();
  /** Set by the service: its rules and its lookup. */
  describeRules: () => string = () => this.limiterRules();
  lookupStates: (key: string) => Promise<KeyState[]> = (key) => this.peekAll(key);

  constructor(options: DashboardOptions = {}) {
    const o = optionsObject('createDashboard', options, ['keys', 'topKeys', 'history', 'maxSeries']);
    this.keys = validKeyDisplay(o.keys);
    this.show = keyShower(this.keys);
    this.capacity = o.topKeys === undefined ? 1000 : positiveInteger('topKeys', o.topKeys, 1_000_000);
    const historyMs = o.history === undefined ? 300_000 : parseDuration('history', o.history);
    if (historyMs < 1000 || historyMs > MOST_HISTORY_MS)
      throw new InvalidOptionError('history', o.history, "a duration from '1s' to '1h'");
    this.seconds = Math.round(historyMs / 1000);
    this.maxSeries = o.maxSeries === undefined ? 100 : positiveInteger('maxSeries', o.maxSeries, 10_000);
  }

  /** The series called `name`, made on first use; past maxSeries, "(other)". */
  seriesOf(name: string): Series {
    let found = this.series.get(name);
    if (found === undefined) {
      const full = this.series.size >= this.maxSeries - 1 && name !== OTHER;
      if (full) return this.seriesOf(OTHER);
      found = new Series(name, this.seconds, this.capacity);
      this.series.set(name, found);
    }
    return found;
  }

  /** The latency and, for a decision made without the store, the failure policy's answer. */
  timed(decision: Decision, durationMs: number): void {
    this.health.latency(durationMs);
    if (decision.reason !== undefined) this.health.answered(decision.reason, decision.allowed);
  }

  readonly record = (event: DecisionEvent): void => {
    if (event.operation !== 'limit') return;
    this.recordIn(this.seriesOf(`${event.prefix}/${event.policy}`), event.key, event.decision, event.durationMs);
  };

  private recordIn(series: Series, key: string | undefined, decision: Decision, durationMs: number): void {
    // The store's clock, read already, where it decided; this process's for the failure policy's answers.
    series.count(key, outcomeOf(decision), decision.decidedAt ?? Date.now());
    this.timed(decision, durationMs);
  }

  observe(limiter: Limiter, options: ObserveOptions = {}): Limiter {
    if (typeof limiter !== 'object' || limiter === null || typeof limiter.policy !== 'object')
      throw new InvalidArgumentError('limiter', limiter, 'a limiter from createLimiter()');
    const name = `${limiter.prefix}/${limiter.policy.name}`;
    // Told by observe() directly, not through onDecision: no event object a decision. Its options
    // are checked before the series is made, which no decision reaches before observeWith returns.
    const observed = observeWith(limiter, options, (key, decision, durationMs) =>
      this.recordIn(series, key, decision, durationMs),
    );
    const series = this.seriesOf(name);
    limiter.watchStore(this.watcher);
    if (this.limiters.size < this.maxSeries || this.limiters.has(name)) this.limiters.set(name, limiter);
    return observed;
  }

  snapshot(top = 10): DashboardSnapshot {
    const now = Date.now();
    const shown = (list: SeriesSnapshot['topUsed']) => list.map((hit) => ({ ...hit, item: this.show(hit.item) }));
    return {
      version: 1,
      now,
      startedAt: this.startedAt,
      seconds: this.seconds,
      keys: this.keys,
      capacity: this.capacity,
      sampling: { exactPerSecond: EXACT_PER_SECOND, oneIn: SAMPLE_ONE_IN },
      series: [...this.series.values()].map((series) => {
        const snapshot = series.snapshot(now, top);
        return { ...snapshot, topUsed: shown(snapshot.topUsed), topDenied: shown(snapshot.topDenied) };
      }),
      store: this.health.snapshot(),
      rules: this.describeRules(),
    };
  }

  async lookup(key: string): Promise<KeyLookup> {
    if (typeof key !== 'string' || key === '') throw new InvalidArgumentError('key', key, 'a non-empty string');
    return { key: this.show(key), states: await this.lookupStates(key) };
  }

  private async peekAll(key: string): Promise<KeyState[]> {
    return Promise.all(
      [...this.limiters].map(([name, limiter]) =>
        limiter.peek(key).then(
          (decision): KeyState => ({ name, decision: stateOf(decision) }),
          (error: unknown): KeyState => ({ name, error: messageOf(error) }),
        ),
      ),
    );
  }

  private limiterRules(): string {
    return [...this.limiters]
      .map(
        ([name, limiter]) =>
          `${name}: ${limiter.policies.map((p) => `${p.algorithm} ${p.limit} per ${formatDuration(p.windowMs)}`).join('; ')}\n`,
      )
      .join('');
  }
}

/** A dashboard's recorder: observe limiters through it, and mount its handler (docs/dashboard.md). */
export function createDashboard(options?: DashboardOptions): Dashboard {
  return new Recorder(options);
}

export { stateOf as keyStateOf };
