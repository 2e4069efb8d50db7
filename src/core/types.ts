import type { Algorithm } from '../engine/algorithm.js';
import type { StoreError } from './errors.js';

/** Why a decision was made without the store: it failed, or did not reply within the timeout. */
export type FailureReason = 'store-error' | 'timeout';

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

/**
 * What the composite script replies, in Redis and in memory alike:
 * [allowed (1|0), now (the server's time in ms), blocked for ms (0 if not blocked),
 *  then five numbers per policy: allowed, remaining, resetAfterMs, retryAfterMs, extra (a lease id)].
 */
export type Reply = readonly number[];

/** One key's state as a twin sees it: its value and, like PTTL, the milliseconds it has left. */
export interface Entry<V> {
  readonly value: V;
  readonly ttlMs: number;
}

/** What a twin does to one key: keep it (undefined), delete it (null) or write it with a TTL. */
export type Write<V> = Entry<V> | null | undefined;

/** A script argument: what Redis receives as ARGV. */
export type Arg = string | number;

/**
 * One atomic step, twice: `lua` runs inside Redis, `twin` is the same step in TypeScript.
 * The twin takes the time as an argument and returns what it writes instead of writing, so the
 * memory store can apply it and tests can drive it with any clock.
 */
export interface Script {
  readonly name: string;
  /** The whole script: `setup`, then `body`. */
  readonly lua: string;
  /** Definitions: the algorithms' functions and the driver, `decideCall`. A batch runs them once, then the driver per request. */
  readonly setup: string;
  /** A call on its own: reads the time, runs the driver on KEYS and ARGV, returns its reply. */
  readonly body: string;
  /** SHA1 of `lua`, for EVALSHA. */
  readonly sha: string;
  /**
   * The same step for a server without PEXPIRETIME (before Redis 7.0), which `lua` calls;
   * undefined when `lua` runs on any Redis from 6.2.
   */
  readonly withoutPexpiretime?: Script;
  twin(
    now: number,
    entries: readonly (Entry<unknown> | undefined)[],
    args: readonly Arg[],
  ): {
    reply: Reply;
    writes: readonly Write<unknown>[];
  };
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
  /** The algorithm's Lua and twin; internal to sluice. */
  readonly kind: Algorithm;
  /** The numeric parameters the algorithm receives; internal to sluice. */
  readonly params: readonly number[];
}
