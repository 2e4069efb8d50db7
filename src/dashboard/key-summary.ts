import { SpaceSaving, type HeavyHitter } from './space-saving.js';

/** A summary's decisions a second counted one by one; past them, one in SAMPLE_ONE_IN is counted. */
export const EXACT_PER_SECOND = 1000;
/** Past EXACT_PER_SECOND, one decision in this many (a power of two) is counted, standing for this many. */
export const SAMPLE_ONE_IN = 32;

/**
 * The heaviest keys of one stream, as two Space-Saving summaries of `capacity` counters: one of the
 * keys counted one by one, one of the keys sampled, each sample standing for SAMPLE_ONE_IN. Apart,
 * each summary's counters move by one, so that an update touches one bucket, not the buckets of the
 * counts it would pass (on a busy limiter those are cache misses). A key's estimate adds both, a
 * sample counting SAMPLE_ONE_IN; where a summary does not hold the key, its part is anything from 0
 * to that summary's bound, counted as its bound and as possible error, so that every estimate stays
 * at least the key's (weighted) count and at most its error above it.
 */
export class KeySummary {
  private readonly exact: SpaceSaving;
  private readonly sampled: SpaceSaving;

  constructor(capacity: number) {
    this.exact = new SpaceSaving(capacity);
    this.sampled = new SpaceSaving(capacity);
  }

  /** Counts one decision of `key`. */
  add(key: string): void {
    this.exact.add(key);
  }

  /** Counts one sample of `key`: SAMPLE_ONE_IN decisions. */
  addSample(key: string): void {
    this.sampled.add(key);
  }

  /** N: the decisions counted, a sample as SAMPLE_ONE_IN. */
  get total(): number {
    return this.exact.total + this.sampledTotal;
  }

  /** The decisions of N that samples stand for. */
  get sampledTotal(): number {
    return this.sampled.total * SAMPLE_ONE_IN;
  }

  /** The most an estimate overestimates now: at most N / capacity. */
  get bound(): number {
    return this.exact.bound + this.sampled.bound * SAMPLE_ONE_IN;
  }

  /** The `n` largest estimates, largest first (ties by key). */
  top(n: number): HeavyHitter[] {
    const sampled = new Map(this.sampled.top(this.sampled.size).map((hit) => [hit.item, hit]));
    if (sampled.size === 0) return this.exact.top(n);
    const exactBound = this.exact.bound;
    const sampledBound = this.sampled.bound;
    const merged: HeavyHitter[] = [];
    for (const hit of this.exact.top(this.exact.size)) {
      const sample = sampled.get(hit.item);
      sampled.delete(hit.item);
      const count = sample === undefined ? sampledBound : sample.count;
      const error = sample === undefined ? sampledBound : sample.error;
      merged.push({
        item: hit.item,
        count: hit.count + count * SAMPLE_ONE_IN,
        error: hit.error + error * SAMPLE_ONE_IN,
      });
    }
    for (const sample of sampled.values())
      merged.push({
        item: sample.item,
        count: exactBound + sample.count * SAMPLE_ONE_IN,
        error: exactBound + sample.error * SAMPLE_ONE_IN,
      });
    return merged.sort((a, b) => b.count - a.count || (a.item < b.item ? -1 : 1)).slice(0, n);
  }
}
