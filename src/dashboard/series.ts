import { SpaceSaving, type HeavyHitter } from './space-saving.js';

/**
 * What a decision made of a request, each in one class only: `admitted` within its limits,
 * `denied`, or `shadowDenied`, admitted in shadow mode although its limits would deny it.
 */
export type Outcome = 'admitted' | 'denied' | 'shadowDenied';

export const OUTCOMES: readonly Outcome[] = ['admitted', 'denied', 'shadowDenied'];
const ADMITTED = 0;
const DENIED = 1;
const SHADOW_DENIED = 2;
const SLOT = { admitted: ADMITTED, denied: DENIED, shadowDenied: SHADOW_DENIED } as const;

export type Counts = Record<Outcome, number>;

/** A series in a snapshot: totals since the start, per second over the last `seconds`, and its top keys. */
export interface SeriesSnapshot {
  readonly name: string;
  readonly total: Counts;
  /** One entry per second, oldest first; the last is the second now under way. */
  readonly perSecond: Record<Outcome, number[]>;
  readonly topUsed: readonly HeavyHitter[];
  readonly topDenied: readonly HeavyHitter[];
  /** How many requests (used) and denials (denied and shadow-denied) the summaries have seen: their N. */
  readonly seen: { readonly used: number; readonly denied: number };
  /** Each summary's bound now: its counts overestimate by at most this, at most N / capacity. */
  readonly bound: { readonly used: number; readonly denied: number };
}

/**
 * One rule's or policy's decisions: a ring of per-second counts over the last `seconds` (a slot is
 * cleared when its second comes round again), totals, and two Space-Saving summaries of keys, by
 * use and by denials (shadow denials included).
 */
export class Series {
  private readonly ring: Float64Array;
  /** The second (since the epoch) each slot counts. */
  private readonly stamps: Float64Array;
  private readonly totals = new Float64Array(3);
  private readonly used: SpaceSaving;
  private readonly denials: SpaceSaving;

  constructor(
    readonly name: string,
    private readonly seconds: number,
    capacity: number,
  ) {
    this.ring = new Float64Array(seconds * 3);
    this.stamps = new Float64Array(seconds).fill(-1);
    this.used = new SpaceSaving(capacity);
    this.denials = new SpaceSaving(capacity);
  }

  /** Counts one request of `key` (undefined: counted, not summarised) at `nowMs`. */
  count(key: string | undefined, outcome: Outcome, nowMs: number): void {
    const second = Math.floor(nowMs / 1000);
    const slot = second % this.seconds;
    if (this.stamps[slot] !== second) {
      this.stamps[slot] = second;
      this.ring.fill(0, slot * 3, slot * 3 + 3);
    }
    const at = SLOT[outcome];
    this.ring[slot * 3 + at]!++;
    this.totals[at]!++;
    if (key === undefined) return;
    this.used.add(key);
    if (at !== ADMITTED) this.denials.add(key);
  }

  snapshot(nowMs: number, top: number): SeriesSnapshot {
    const now = Math.floor(nowMs / 1000);
    const perSecond: Record<Outcome, number[]> = { admitted: [], denied: [], shadowDenied: [] };
    for (let second = now - this.seconds + 1; second <= now; second++) {
      const slot = second % this.seconds;
      const current = this.stamps[slot] === second;
      for (const outcome of OUTCOMES)
        perSecond[outcome].push(current ? (this.ring[slot * 3 + SLOT[outcome]] as number) : 0);
    }
    return {
      name: this.name,
      total: {
        admitted: this.totals[ADMITTED] as number,
        denied: this.totals[DENIED] as number,
        shadowDenied: this.totals[SHADOW_DENIED] as number,
      },
      perSecond,
      topUsed: this.used.top(top),
      topDenied: this.denials.top(top),
      seen: { used: this.used.total, denied: this.denials.total },
      bound: { used: this.used.bound, denied: this.denials.bound },
    };
  }
}
