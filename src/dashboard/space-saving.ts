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
 * most N / capacity; so every item whose true count exceeds N / capacity is monitored. Counters are
 * an indexed min-heap: an increment is one Map lookup and a sift of at most log2(capacity) steps.
 */
export class SpaceSaving {
  private readonly items: string[] = [];
  private readonly counts: Float64Array;
  private readonly errors: Float64Array;
  /** Each monitored item's place in the heap. */
  private readonly places = new Map<string, number>();
  /** N: the increments so far. */
  total = 0;

  constructor(readonly capacity: number) {
    this.counts = new Float64Array(capacity);
    this.errors = new Float64Array(capacity);
  }

  /** How many items are monitored: never more than `capacity`. */
  get size(): number {
    return this.items.length;
  }

  /** The most any estimate overestimates now: the smallest counter once full, else 0 (every count is exact). */
  get bound(): number {
    return this.items.length < this.capacity ? 0 : (this.counts[0] as number);
  }

  add(item: string): void {
    this.total++;
    const place = this.places.get(item);
    if (place !== undefined) {
      this.counts[place]!++;
      this.siftDown(place);
      return;
    }
    const size = this.items.length;
    if (size < this.capacity) {
      // A new counter of 1 is the smallest there is: the heap's last leaf is its place.
      this.items.push(item);
      this.counts[size] = 1;
      this.errors[size] = 0;
      this.places.set(item, size);
      this.siftUp(size);
      return;
    }
    // Full: the item takes over the smallest counter, and inherits its count as its possible error.
    this.places.delete(this.items[0] as string);
    this.items[0] = item;
    this.places.set(item, 0);
    this.errors[0] = this.counts[0] as number;
    this.counts[0]!++;
    this.siftDown(0);
  }

  /** The `n` largest estimates, largest first (ties by item, for a stable order). */
  top(n: number): HeavyHitter[] {
    return this.items
      .map((item, i) => ({ item, count: this.counts[i] as number, error: this.errors[i] as number }))
      .sort((a, b) => b.count - a.count || (a.item < b.item ? -1 : 1))
      .slice(0, n);
  }

  private siftUp(start: number): void {
    let i = start;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if ((this.counts[parent] as number) <= (this.counts[i] as number)) return;
      this.swap(i, parent);
      i = parent;
    }
  }

  private siftDown(start: number): void {
    const size = this.items.length;
    let i = start;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= size) return;
      const right = left + 1;
      const child = right < size && (this.counts[right] as number) < (this.counts[left] as number) ? right : left;
      if ((this.counts[child] as number) >= (this.counts[i] as number)) return;
      this.swap(i, child);
      i = child;
    }
  }

  private swap(a: number, b: number): void {
    const item = this.items[a] as string;
    this.items[a] = this.items[b] as string;
    this.items[b] = item;
    const count = this.counts[a] as number;
    this.counts[a] = this.counts[b] as number;
    this.counts[b] = count;
    const error = this.errors[a] as number;
    this.errors[a] = this.errors[b] as number;
    this.errors[b] = error;
    this.places.set(this.items[a], a);
    this.places.set(this.items[b], b);
  }
}
