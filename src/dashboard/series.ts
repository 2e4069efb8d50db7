import { EXACT_PER_SECOND, KeySummary, SAMPLE_ONE_IN } from './key-summary.js';
import type { HeavyHitter } from './space-saving.js';

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
  /** Of `seen`, the requests and denials counted by sampling (past EXACT_PER_SECOND in their second). */
  readonly sampled: { readonly used: number; readonly denied: number };
}

/**
 * One rule's or policy's decisions: a ring of per-second counts over the last `seconds` (a slot is
 * cleared when its second comes round again), totals, and two Space-Saving summaries of keys, by
 * use and by denials (shadow denials included). The summaries count the first EXACT_PER_SECOND
 * decisions of each second one by one, then one in SAMPLE_ONE_IN: their Map updates are most of the
 * recorder's cost on a busy limiter (docs/dashboard.md).
 */
export class Series {
  private readonly ring: Float64Array;
  /** The second (since the epoch) each slot counts. */
  private readonly stamps: Float64Array;
  private readonly totals = new Float64Array(3);
  private readonly used: KeySummary;
  private readonly denials: KeySummary;
  /** xorshift32's state, which decides the decisions past EXACT_PER_SECOND summarised: typed, so never boxed. */
  private readonly random = Int32Array.of(0x2545f491);

  constructor(
    readonly name: string,
    private readonly seconds: number,
    capacity: number,
  ) {
    this.ring = new Float64Array(seconds * 3);
    this.stamps = new Float64Array(seconds).fill(-1);
    this.used = new KeySummary(capacity);
    this.denials = new KeySummary(capacity);
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
    const base = slot * 3;
    const ring = this.ring;
    ring[base + at]!++;
    this.totals[at]!++;
    if (key === undefined) return;
    if ((ring[base] as number) + (ring[base + 1] as number) + (ring[base + 2] as number) <= EXACT_PER_SECOND) {
      this.used.add(key);
      if (at !== ADMITTED) this.denials.add(key);
    } else if (this.sampled()) {
      this.used.addSample(key);
      if (at !== ADMITTED) this.denials.addSample(key);
    }
  }

  /** True for one call in SAMPLE_ONE_IN, drawn at random (no period that traffic could fall in step with). */
  private sampled(): boolean {
    let x = this.random[0] as number;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.random[0] = x;
    return (x & (SAMPLE_ONE_IN - 1)) === 0;
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
      sampled: { used: this.used.sampledTotal, denied: this.denials.sampledTotal },
    };
  }
}
