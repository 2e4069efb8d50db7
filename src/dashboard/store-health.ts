import type { FailureReason, StoreFailure, StoreWatcher } from '../core/types.js';

/** The latency histogram's upper bounds, in ms: a Redis round trip takes a fraction of a ms to a few. */
export const LATENCY_BOUNDS_MS: readonly number[] = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000];

/** One outage: from the first failed store call to the first successful one after it. */
export interface Outage {
  /** ms since the epoch, by this process's clock. */
  readonly began: number;
  /** Absent while it lasts. */
  readonly ended?: number;
  /** Why the first call failed. */
  readonly reason: FailureReason;
  /** Store calls that failed during it. */
  readonly failures: number;
  /** What the failure policy (`onStoreError`) answered meanwhile: requests it admitted and denied. */
  readonly answered: { readonly allowed: number; readonly denied: number };
}

export interface StoreSnapshot {
  /** 'unknown' until a decision or a failure has been seen. */
  readonly status: 'up' | 'down' | 'unknown';
  /** Latency of each decision, store round trip included: counts per bucket, the last past the last bound. */
  readonly latency: {
    readonly boundsMs: readonly number[];
    readonly counts: readonly number[];
    readonly sumMs: number;
  };
  /** The latest outages, oldest first. */
  readonly outages: readonly Outage[];
}

/** How many outages are kept: the latest ones. */
const KEPT_OUTAGES = 20;

type OpenOutage = { -readonly [K in keyof Outage]: Outage[K] } & {
  answered: { allowed: number; denied: number };
};

/** A store's latency and outages, as the limiters' failure guards and decisions report them. */
export class StoreHealth {
  private readonly buckets = new Float64Array(LATENCY_BOUNDS_MS.length + 1);
  private sumMs = 0;
  private seen = false;
  private readonly outages: OpenOutage[] = [];
  private open: OpenOutage | undefined;

  constructor(private readonly clock: () => number) {}

  /**
   * For limiter.watchStore(). Several limiters on one store each report: an outage is open from the
   * first failure any reports to the first recovery any reports (a success proves the store is back).
   */
  readonly watcher: StoreWatcher = {
    onOutage: (failure: StoreFailure) => {
      this.opened(failure.reason).failures++;
    },
    onRecovery: () => {
      this.seen = true;
      if (this.open === undefined) return;
      this.open.ended = this.clock();
      this.open = undefined;
    },
  };

  latency(durationMs: number): void {
    this.seen = true;
    this.sumMs += durationMs;
    let i = 0;
    while (i < LATENCY_BOUNDS_MS.length && durationMs > (LATENCY_BOUNDS_MS[i] as number)) i++;
    this.buckets[i]!++;
  }

  /** A decision the failure policy made without the store (its `reason`). */
  answered(reason: FailureReason, allowed: boolean): void {
    this.opened(reason).answered[allowed ? 'allowed' : 'denied']++;
  }

  snapshot(): StoreSnapshot {
    return {
      status: this.open !== undefined ? 'down' : this.seen ? 'up' : 'unknown',
      latency: { boundsMs: LATENCY_BOUNDS_MS, counts: Array.from(this.buckets), sumMs: this.sumMs },
      outages: this.outages.map((outage) => ({ ...outage, answered: { ...outage.answered } })),
    };
  }

  private opened(reason: FailureReason): OpenOutage {
    if (this.open !== undefined) return this.open;
    const outage: OpenOutage = { began: this.clock(), reason, failures: 0, answered: { allowed: 0, denied: 0 } };
    this.open = outage;
    this.outages.push(outage);
    if (this.outages.length > KEPT_OUTAGES) this.outages.shift();
    return outage;
  }
}
