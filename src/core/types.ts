import type { StoreError } from './errors.js';

/** Why a decision was made without the store: it failed, or did not reply within the timeout. */
export type FailureReason = 'store-error' | 'timeout';

/** The answer to one request. Being denied is a decision, not an error. */
export interface Decision {
  /** Whether the request is admitted (and was counted). */
  readonly allowed: boolean;
  /** The most the policy admits at once: a window's limit or a bucket's capacity. */
  readonly limit: number;
  /** How many more requests of cost 1 would be admitted right now. A whole number, never negative. */
  readonly remaining: number;
  /** Milliseconds until this key's state is fully reset (window end, bucket full); 0 when it holds nothing. */
  readonly resetAfterMs: number;
  /** 0 when allowed; when denied, the milliseconds until the same request would be admitted. */
  readonly retryAfterMs: number;
  /** Set only when the store failed and the decision follows the limiter's `onStoreError`. */
  readonly reason?: FailureReason;
  /** The store's failure, when `reason` is set. */
  readonly error?: StoreError;
}

/**
 * What a script replies, in Redis and in memory alike:
 * [allowed (1|0), remaining, resetAfterMs, retryAfterMs, now (the server's time in ms)].
 */
export type Reply = readonly [number, number, number, number, number];

/** One key's state as a twin sees it: its value and, like PTTL, the milliseconds it has left. */
export interface Entry<V> {
  readonly value: V;
  readonly ttlMs: number;
}

/** What a twin does to one key: keep it (undefined), delete it (null) or write it with a TTL. */
export type Write<V> = Entry<V> | null | undefined;

/**
 * One atomic step, twice: `lua` runs inside Redis, `twin` is the same decision in TypeScript.
 * The twin takes the time as an argument and returns what it writes instead of writing, so the
 * memory store can apply it and tests can drive it with any clock.
 */
export interface Script<V = unknown> {
  readonly name: string;
  readonly lua: string;
  /** SHA1 of `lua`, for EVALSHA. */
  readonly sha: string;
  twin(now: number, entries: readonly (Entry<V> | undefined)[], args: readonly number[]): {
    reply: Reply;
    writes: readonly Write<V>[];
  };
}

/** Whether a step counts the request or only reports what would happen. */
export type Mode = 'consume' | 'peek';

/** What is allowed: built by fixedWindow(), slidingLog(), tokenBucket(). */
export interface Policy {
  /** The algorithm, e.g. 'fixed-window'. */
  readonly algorithm: string;
  /** The policy's name in RateLimit-Policy and RateLimit headers. */
  readonly name: string;
  /** The most admitted at once: the window's limit or the bucket's capacity. */
  readonly limit: number;
  /** The quota's window in ms (for a token bucket: the time to refill from empty to full). */
  readonly windowMs: number;
  /** The step that decides a request; internal to sluice and its stores. */
  readonly script: Script;
  /** Tells apart the keys of different algorithms under one prefix. */
  readonly keySuffix: string;
  /** ARGV for the script: [cost, peek (1|0), ...this policy's parameters]. */
  args(cost: number, mode: Mode): readonly number[];
}
