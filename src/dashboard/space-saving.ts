/** One monitored item of a SpaceSaving summary. */
export interface HeavyHitter {
  readonly item: string;
  /** The estimate: at least the item's true count, and at most `error` above it. */
  readonly count: number;
  /** How far `count` may overestimate: the count the item took over when it entered (0 if it never replaced one). */
  readonly error: number;
}

/**
 * The heaviest items of a stream in fixed memory: Space-Saving (Metwally, Agrawal and El Abbadi,
 * 2005) with `capacity` counters. After N increments, every estimate is at least the item's true
 * count and overestimates it by at most its `error`, itself at most the smallest counter, itself at
 * most N / capacity; so every item whose true count exceeds N / capacity is monitored. Counters sit
 * in their paper's Stream-Summary, buckets of equal counts in ascending order, so that an increment
 * is one Map lookup and a move to the next bucket, whatever the capacity.
 */
export class SpaceSaving {
  private readonly counters = new Map<string, Counter>();
  /** The bucket of the smallest count. */
  private smallest: Bucket | undefined;
  /** N: the increments so far. */
  total = 0;

  constructor(readonly capacity: number) {}

  /** How many items are monitored: never more than `capacity`. */
  get size(): number {
    return this.counters.size;
  }

  /** The most any estimate overestimates now: the smallest counter once full, else 0 (every count is exact). */
  get bound(): number {
    return this.counters.size < this.capacity ? 0 : (this.smallest as Bucket).count;
  }

  add(item: string): void {
    this.total++;
    const counter = this.counters.get(item);
    if (counter !== undefined) return this.increment(counter);
    if (this.counters.size < this.capacity) {
      let ones = this.smallest;
      if (ones === undefined || ones.count !== 1) {
        ones = { count: 1, counters: undefined, next: ones, previous: undefined };
        if (this.smallest) this.smallest.previous = ones;
        this.smallest = ones;
      }
      const added: Counter = { item, error: 0, bucket: ones, next: undefined, previous: undefined };
      attach(added, ones);
      this.counters.set(item, added);
      return;
    }
    // Full: the item takes over a smallest counter, and inherits its count as its possible error.
    const taken = (this.smallest as Bucket).counters as Counter;
    this.counters.delete(taken.item);
    this.counters.set(item, taken);
    taken.item = item;
    taken.error = taken.bucket.count;
    this.increment(taken);
  }

  /** The `n` largest estimates, largest first (ties by item, for a stable order). */
  top(n: number): HeavyHitter[] {
    return [...this.counters.values()]
      .map(({ item, error, bucket }) => ({ item, count: bucket.count, error }))
      .sort((a, b) => b.count - a.count || (a.item < b.item ? -1 : 1))
      .slice(0, n);
  }

  /** Moves `counter` to the bucket of its count plus one, made if there is none. */
  private increment(counter: Counter): void {
    const bucket = counter.bucket;
    const count = bucket.count + 1;
    const next = bucket.next;
    if (counter.next === undefined && counter.previous === undefined && (next === undefined || next.count !== count)) {
      // Alone in its bucket, and no bucket of count + 1: the bucket itself moves up.
      bucket.count = count;
      return;
    }
    detach(counter);
    let target = next;
    if (target === undefined || target.count !== count) {
      target = { count, counters: undefined, next, previous: bucket };
      if (next) next.previous = target;
      bucket.next = target;
    }
    attach(counter, target);
    if (bucket.counters === undefined) this.unlink(bucket);
  }

  private unlink(bucket: Bucket): void {
    if (bucket.previous) bucket.previous.next = bucket.next;
    else this.smallest = bucket.next;
    if (bucket.next) bucket.next.previous = bucket.previous;
  }
}

/** Counters of one count, in a list. */
interface Bucket {
  count: number;
  counters: Counter | undefined;
  next: Bucket | undefined;
  previous: Bucket | undefined;
}

interface Counter {
  item: string;
  error: number;
  bucket: Bucket;
  next: Counter | undefined;
  previous: Counter | undefined;
}

function attach(counter: Counter, bucket: Bucket): void {
  counter.bucket = bucket;
  counter.previous = undefined;
  counter.next = bucket.counters;
  if (bucket.counters) bucket.counters.previous = counter;
  bucket.counters = counter;
}

function detach(counter: Counter): void {
  if (counter.previous) counter.previous.next = counter.next;
  else counter.bucket.counters = counter.next;
  if (counter.next) counter.next.previous = counter.previous;
}
