import type { Duration } from './duration.js';
import type { StoreError } from './errors.js';

/** Why a decision was made without the store: it failed, or did not reply within the timeout. */
export type FailureReason = 'store-error' | 'timeout';

/** The limiter call a store call was made for (acquire(), reserve() and limitMany() decide by 'limit'). */
export type Operation = 'limit' | 'peek' | 'reset' | 'refund' | 'settle' | 'block' | 'release' | 'extend';

/** Passed to `onOutage` for every failed store call. */
export interface StoreFailure {
  readonly operation: Operation;
  readonly reason: FailureReason;
  readonly error: StoreError;
  /** Failed store calls since the last successful one, this one included: 1 when an outage begins. */
  readonly failures: number;
}

/** Passed to `onRecovery` on the first successful store call after one or more failures. */
export interface StoreRecovery {
  readonly failures: number;
  /** Milliseconds from the first failure to this success, by this process's clock. */
  readonly downForMs: number;
}

/**
 * Told of a limiter's store outages, as its failure guard, their only tracker, sees them. Called
 * synchronously, for logs and metrics; one that throws changes no decision (a SLUICE_HOOK_FAILED
 * warning says so).
 */
export interface StoreWatcher {
  /** Each store call that failed or timed out: an outage begins with the first (`failures: 1`). */
  onOutage?: (failure: StoreFailure) => void;
  /** The first successful store call after an outage. */
  onRecovery?: (recovery: StoreRecovery) => void;
}

/** The answer to one request. Being denied is a decision, not an error. */
export interface Decision {
  /** Whether the request is admitted (and was counted). */
  readonly allowed: boolean;
  /** The most the policy admits at once: a window's limit, a bucket's capacity, gcra's burst. */
  readonly limit: number;
  /** How many more requests of cost 1 would be admitted right now. A whole number, never negative. */
  readonly remaining: number;
  /** Milliseconds until this key's state is fully reset (window end, bucket full); 0 when it holds nothing. */
  readonly resetAfterMs: number;
  /** 0 when allowed; when denied, the milliseconds until the same request would be admitted. */
  readonly retryAfterMs: number;
  /**
   * Each policy's own numbers, in the limiter's order (one item for a single policy). The fields
   * above are those of the policy that decided: when denied, the one that denies longest; when
   * allowed, the one with the least room left.
   */
  readonly policies: readonly PolicyDecision[];
  /** Present when the key is blocked (block() or the penalty box): for how much longer, in ms. */
  readonly blockedForMs?: number;
  /** Present in shadow mode (dry run): `allowed` is always true there. */
  readonly shadow?: true;
  /** In shadow mode: whether the request would have been denied. */
  readonly shadowDenied?: boolean;
  /** Set only when the store failed and the decision follows the limiter's `onStoreError`. */
  readonly reason?: FailureReason;
  /** The store's failure, when `reason` is set. */
  readonly error?: StoreError;
  /**
   * When the store decided, by its clock (the Redis server's), in ms since the epoch; absent for a
   * decision made without it (`reason`); for a denial from the denied-key cache, the store's time
   * then, from the time elapsed since. refund({ decision }) gives back to what it charged then.
   */
  readonly decidedAt?: number;
}

/** One policy's part in a decision. */
export interface PolicyDecision {
  readonly name: string;
  readonly algorithm: string;
  /** The policy's unit: remaining and limit count it. */
  readonly counts: string;
  readonly limit: number;
  readonly windowMs: number;
  /** Whether this policy alone would admit the request. */
  readonly allowed: boolean;
  readonly remaining: number;
  readonly resetAfterMs: number;
  readonly retryAfterMs: number;
}

/** What is allowed: built by fixedWindow(), slidingLog(), tokenBucket(), gcra(), slidingWindow(), concurrency(). */
export interface Policy {
  /** The algorithm, e.g. 'fixed-window'. */
  readonly algorithm: string;
  /** The policy's name in RateLimit-Policy and RateLimit headers. */
  readonly name: string;
  /** What it counts: 'requests', or its `counts` option ('tokens'), the unit a call's cost object names. */
  readonly counts: string;
  /** The quota: requests per window (a bucket's capacity, gcra's burst, a concurrency limit). */
  readonly limit: number;
  /** The quota's window in ms (a token bucket and gcra: the time to refill from empty to full). */
  readonly windowMs: number;
  /** The largest cost that can ever be admitted. */
  readonly maxCost: number;
}

/**
 * A request's cost in each unit its policies count (their `counts`): `{ requests: 1, tokens: 1200 }`.
 * A unit left out costs 0 in the policies that count it.
 */
export type CostByUnit = Readonly<Record<string, number>>;

export interface LimitOptions {
  /**
   * What this request uses (default 1): a whole number from 1 to each policy's limit, taken in
   * every policy; or each unit's own (CostByUnit), from 0, at least one above 0.
   */
  cost?: number | CostByUnit;
  /** Decide this call under other policies (a paid tier, a dynamic limit); the key's state is shared. */
  policy?: Policy | readonly Policy[];
}

export interface RefundOptions extends Pick<LimitOptions, 'policy'> {
  /**
   * The decision that charged what is given back: the units go back only where they were charged
   * (a window that has ended keeps them), and nothing goes back for a decision that charged nothing
   * (denied, shadow-denied, decided without the store). Without it, they go back to the key's
   * state as it is now (docs/algorithms.md, "Giving back").
   */
  decision?: Decision;
}

export interface WaitOptions extends LimitOptions {
  /** Give up (resolve with the denial) when the wait would end later than this. Default: no limit. */
  timeout?: Duration;
  /** Aborting, before the call or during the wait, rejects with the signal's reason itself. */
  signal?: AbortSignal;
}

/**
 * A request admitted at an estimate of its cost, from reserve(): once its true cost is known,
 * settle() corrects the charge. Unsettled, it stays charged at the estimate. settle and cancel
 * work detached from the reservation (the middleware takes them off it): they use no `this`.
 */
export interface Reservation extends Decision {
  /**
   * Corrects the charge to `actual` (a number for every policy, or CostByUnit; units left out
   * cost 0): gives back what the estimate took too much, as refund() does, and takes what it took
   * too little even past the limit, leaving the key in debt, denied until time pays it off (at
   * most one limit's worth of debt per policy is taken). Resolves true when this call settled the
   * reservation; false when it was settled or cancelled before, or charged nothing (denied, or
   * decided without the store). A failed settle rejects with a StoreError, changes nothing, and
   * may be retried.
   */
  settle(this: void, actual: number | CostByUnit): Promise<boolean>;
  /** Gives back the whole estimate: settle(0). */
  cancel(this: void): Promise<boolean>;
}

/** A slot taken by acquire() under a concurrency policy. */
export interface Lease extends Decision {
  /** Gives the slot back. Resolves false if it was not held (already released, expired, or denied). */
  release(): Promise<boolean>;
  /** Holds the slot for `ms` more from now (default: the policy's leaseMs). False if no longer held. */
  extend(ms?: Duration): Promise<boolean>;
}

export interface Limiter {
  readonly policies: readonly Policy[];
  /** The first policy (the only one, for most limiters). */
  readonly policy: Policy;
  readonly prefix: string;
  /** Decides one request and counts it if admitted. Resolves whether allowed or denied. */
  limit(key: string, options?: LimitOptions): Promise<Decision>;
  /**
   * limit(), answered at once: there only where the store decides in this process (memoryStore)
   * and the limiter takes no quota leases. Throws on bad input, as limit() rejects. Needs no `this`.
   */
  readonly limitNow?: (key: string, options?: LimitOptions) => Decision;
  /** What a request of cost 1 would get now. Consumes nothing, writes nothing. */
  peek(key: string, options?: Pick<LimitOptions, 'policy'>): Promise<Decision>;
  /** Decides several keys at once: every request is sent before any answer is awaited. */
  limitMany(keys: readonly string[], options?: LimitOptions): Promise<Decision[]>;
  /** Forgets this key's state, blocks included. */
  reset(key: string): Promise<void>;
  /** Gives `cost` units back (a request that turned out not to count), where its `decision` charged them. Never creates state. */
  refund(key: string, cost?: number | CostByUnit, options?: RefundOptions): Promise<boolean>;
  /** As limit(), at an estimated cost that settle() corrects once the true cost is known; see Reservation. */
  reserve(key: string, options?: LimitOptions): Promise<Reservation>;
  /** Denies every request of this key for `duration`, without touching its counters. */
  block(key: string, duration: Duration): Promise<void>;
  /** Waits exactly as long as the limit demands, then takes the units; see WaitOptions. */
  waitFor(key: string, options?: WaitOptions): Promise<Decision>;
  /** Takes a slot of the limiter's concurrency policy; release it when the work is done. */
  acquire(key: string, options?: LimitOptions): Promise<Lease>;
  /** The Redis keys that hold this key's state, for inspecting or repairing it by hand. Asks the store nothing. */
  storageKeys(key: string): StorageKeys;
  /** Tells `watcher` of the store's outages and recoveries too, besides `onOutage` and `onRecovery` (as observe() does). */
  watchStore(watcher: StoreWatcher): void;
  /** Tells `watcher` of the quota leases this limiter takes and ends (a limiter with `lease`; observe() counts them). */
  watchLeases?(watcher: QuotaLeaseWatcher): void;
  /**
   * Gives back the unused units of every quota lease held (a limiter with `lease`), and takes no
   * more: later calls ask the store each time. Resolves once the store was asked. Closes no store.
   */
  close(): Promise<void>;
}

/** A limiter's `lease`: each process takes `units` of the quota at once, for at most `ms` (docs/leases.md). */
export interface QuotaLeaseOptions {
  /** Units taken from the store at once, at most the policy's limit. */
  readonly units: number;
  /** The longest a lease is used before its unused units are given back. */
  readonly ms: Duration;
}

/** Told of a limiter's quota leases, for metrics (observe() counts them in sluice.leases.*). */
export interface QuotaLeaseWatcher {
  /** A lease of `units` was taken from the store (the request that took it included). */
  onTaken?(units: number): void;
  /** A lease ended and `units` it did not use were given back to the store. */
  onReturned?(units: number): void;
  /** `units` of a lease were never used and did not go back: their time passed, or the store failed. */
  onExpired?(units: number): void;
}

/** The Redis keys of one key's state under a limiter. Each exists only while it holds something. */
export interface StorageKeys {
  /** The block: set by block() and the penalty box. */
  readonly block: string;
  /** Denials in a row, counted by the penalty box. */
  readonly strikes: string;
  /** Each policy's state, in the limiter's order. */
  readonly policies: readonly string[];
}
