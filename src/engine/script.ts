/**
 * What the composite script replies, in Redis and in memory alike:
 * [now (the server's time in ms), allowed (1|0), blocked for ms (0 if not blocked),
 *  then five numbers per policy: allowed, remaining, resetAfterMs, retryAfterMs, extra (a lease id)].
 */
export type Reply = readonly number[];

/** A script argument: what Redis receives as ARGV. */
export type Arg = string | number;

/**
 * One key as a twin reads and changes it, as a script does a Redis key: `held` says whether the key
 * exists (a missing or expired key does not), `value` and `ttlMs` (its PTTL) what it holds. The twin
 * writes by changing them and setting `written`; the store applies the written cells after the
 * step. Cells are the store's, reused from call to call: a twin keeps no reference to one.
 */
export interface Cell<V = unknown> {
  held: boolean;
  value: V | undefined;
  ttlMs: number;
  written: boolean;
}

/** A cell that holds nothing and was not written. */
export function emptyCell<V>(): Cell<V> {
  return { held: false, value: undefined, ttlMs: 0, written: false };
}

/** Writes `value` with a TTL into the cell, as SET ... PX would. */
export function setCell<V>(cell: Cell<V>, value: V, ttlMs: number): void {
  cell.held = true;
  cell.value = value;
  cell.ttlMs = ttlMs;
  cell.written = true;
}

/** Deletes the cell's key, as DEL would. */
export function deleteCell(cell: Cell): void {
  cell.held = false;
  cell.value = undefined;
  cell.written = true;
}

/**
 * One atomic step, twice: `lua` runs inside Redis, `twin` is the same step in TypeScript.
 * The twin takes the time as an argument and reads and writes its keys through cells, which the
 * memory store fills and then applies, and tests can drive with any clock.
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
  /**
   * The step on the keys' cells (one per key, in KEYS' order), at `now`: its reply, which the next
   * step may reuse (a caller that keeps it copies it).
   */
  twin(now: number, cells: readonly Cell[], args: readonly Arg[]): Reply;
}
