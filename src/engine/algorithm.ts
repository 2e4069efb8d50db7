import type { Policy } from '../core/types.js';
import type { Entry, Write } from './script.js';

/**
 * What one policy says of one request before anything is written. The composite script asks every
 * policy of a limiter first, then admits the request in all of them or in none.
 */
export interface Step<V> {
  readonly allowed: boolean;
  /** Requests of cost 1 that would be admitted now, before this one is counted (may be negative). */
  readonly remaining: number;
  readonly resetAfter: number;
  readonly retryAfter: number;
  /**
   * Counts the request: what to write, and the state after it. `extra` is a lease id, or 0.
   * admit and keep may write the entry's own value, changed in place (the store applies their write
   * at once, in the same step); decide, and a peek, never change it.
   */
  admit(): { write: Write<V>; remaining: number; resetAfter: number; extra: number };
  /** The request is not counted here (denied by this or another policy): only keep the TTL healthy. */
  keep(): Write<V>;
}

/**
 * An algorithm, twice: Lua that runs inside Redis and a TypeScript twin for the memory store,
 * side by side in one file. The Lua defines `ALG.<id>` with the twin's functions, the step's
 * `admit` and `keep` among them; their contract, and how the Lua reads state and formats numbers,
 * is written in the Lua itself, above `local ALG` (driver.ts's HELPERS; any script under lua/).
 * Where the twin's `decide` returns `admit` and `keep` as closures, the Lua's leaves what they
 * need in a state table, so that a decision allocates no table or closure in Redis.
 */
export interface Algorithm<V = unknown> {
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
  decide(now: number, entry: Entry<V> | undefined, cost: number, p: readonly number[], peek: boolean): Step<V>;
  refund(
    now: number,
    entry: Entry<V> | undefined,
    cost: number,
    p: readonly number[],
  ): { write: Write<V>; done: boolean };
  release?(
    now: number,
    entry: Entry<V> | undefined,
    cost: number,
    p: readonly number[],
    id: number,
  ): { write: Write<V>; done: boolean };
  extend?(
    now: number,
    entry: Entry<V> | undefined,
    cost: number,
    p: readonly number[],
    id: number,
    ms: number,
  ): { write: Write<V>; done: boolean };
}

/** Erases the state type, so algorithms of different state can sit in one list. */
export function defineAlgorithm<V>(algorithm: Algorithm<V>): Algorithm {
  return algorithm;
}

export const unchanged = { write: undefined, done: false } as const;

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
