/**
 * What the composite script replies, in Redis and in memory alike:
 * [now (the server's time in ms), allowed (1|0), blocked for ms (0 if not blocked),
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
