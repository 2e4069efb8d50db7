import type { Policy } from '../core/types.js';
import type { Cell } from './script.js';

/**
 * What one policy's decide answers of one request, before anything is written, and what its admit
 * changes: the Lua's return values. An algorithm's state adds what its decide read for admit and
 * keep, as the Lua's state table does. One state per policy of a call's arguments, reused from
 * call to call, so that a decision allocates no step or closure (docs/performance.md, "In process").
 */
export interface Decided {
  allowed: boolean;
  /** Requests of cost 1 that would be admitted now, before this one is counted (may be negative); after admit, after it. */
  remaining: number;
  resetAfter: number;
  retryAfter: number;
  /** Set by admit: a lease id, or 0. */
  extra: number;
}

/** A state's Decided fields before any decision. */
export function undecided(): Decided {
  return { allowed: false, remaining: 0, resetAfter: 0, retryAfter: 0, extra: 0 };
}

/**
 * An algorithm, twice: Lua that runs inside Redis and a TypeScript twin for the memory store, side
 * by side in one file. The Lua defines `ALG.<id>` with the twin's functions, whose contract is
 * above `local ALG` in driver-lua.ts's HELPERS. The twin reads and writes the key through its
 * cell, as the Lua does through redis.call, and leaves what decide read in `state`, as the Lua does.
 */
export interface Algorithm<V = unknown, S extends Decided = Decided> {
  /** Names the Lua table and suffixes the Redis key: short, [a-z]. */
  readonly id: string;
  /** Admits by lending slots, which acquire() takes and a lease gives back (concurrency). */
  readonly leases?: true;
  /**
   * A denial stands until its retryAfter unless the key's state is changed by hand (refund, reset):
   * the denied-key cache may answer it from memory. Not so for slots that a release frees at any moment.
   */
  readonly stableDenials?: true;
  readonly lua: string;
  /** Its Lua for a server without PEXPIRETIME (Redis 6.2), where `lua` calls it. */
  readonly luaWithoutPexpiretime?: string;
  /** A state for one policy, before any decision. */
  newState(): S;
  /** Asks, writing nothing (a value changed in place included); fills `state`. */
  decide(now: number, cell: Cell<V>, cost: number, p: readonly number[], peek: boolean, state: S): void;
  /** Counts the request, after decide: writes the cell, sets the state's remaining, resetAfter and extra. */
  admit(now: number, cell: Cell<V>, cost: number, p: readonly number[], state: S): void;
  /** The request is not counted here (denied by this or another policy), after decide: only keeps the TTL healthy. */
  keep(now: number, cell: Cell<V>, cost: number, p: readonly number[], state: S): void;
  /**
   * Gives back `cost` units charged at `chargedAt` (the store's ms; 0: unknown, taken as now): no
   * more than that charge still holds where it was taken (docs/algorithms.md, "Giving back").
   * Whether it gave anything.
   */
  refund(now: number, cell: Cell<V>, cost: number, p: readonly number[], chargedAt: number): boolean;
  /** Whether the lease `id` was held, and is now released (concurrency only). */
  release?(now: number, cell: Cell<V>, cost: number, p: readonly number[], id: number): boolean;
  /** Whether the lease `id` was held, and now runs `ms` from now (concurrency only). */
  extend?(now: number, cell: Cell<V>, cost: number, p: readonly number[], id: number, ms: number): boolean;
}

/** Erases the state's types, so algorithms of different state can sit in one list. */
export function defineAlgorithm<V, S extends Decided>(algorithm: Algorithm<V, S>): Algorithm {
  return algorithm;
}

/** A policy as the engine sees it: its public fields, its algorithm and the parameters the algorithm receives. */
export interface EnginePolicy extends Policy {
  readonly kind: Algorithm;
  readonly params: readonly number[];
}

/** A policy object: its public fields, and its algorithm and parameters kept out of logs and spreads. */
export function definePolicy(fields: Policy, kind: Algorithm, params: readonly number[]): Policy {
  return Object.defineProperties({ ...fields }, { kind: { value: kind }, params: { value: params } });
}

/** The engine's view of a policy built by one of the algorithms. */
export function enginePolicy(policy: Policy): EnginePolicy {
  if (!isEnginePolicy(policy)) throw new TypeError(`not a policy built by sluice: ${JSON.stringify(policy)}`);
  return policy;
}

/** Whether `value` is a policy built by one of the algorithms (a plain object with the same fields is not). */
export function isEnginePolicy(value: unknown): value is EnginePolicy {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as EnginePolicy).kind === 'object' &&
    Array.isArray((value as EnginePolicy).params)
  );
}
