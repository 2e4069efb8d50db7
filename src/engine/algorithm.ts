import type { Entry, Policy, Write } from '../core/types.js';
import { formatDuration } from '../core/duration.js';
import type { PeerNames } from '../core/validate.js';

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
  return algorithm as unknown as Algorithm;
}

export const unchanged = { write: undefined, done: false } as const;

/** A policy object: its public fields, and its algorithm and parameters kept out of logs and spreads. */
export function definePolicy(
  fields: Omit<Policy, 'kind' | 'params'>,
  kind: Algorithm,
  params: readonly number[],
): Policy {
  return Object.defineProperties({ ...fields }, { kind: { value: kind }, params: { value: params } }) as Policy;
}

const WINDOW = 'ms, or a string such as "1m"';

/** The peers' names (express-rate-limit, rate-limiter-flexible, @fastify/rate-limit) for a window policy's options. */
export const WINDOW_PEER_NAMES: PeerNames = {
  max: 'use "limit"',
  points: 'use "limit"',
  windowMs: `use "window" (${WINDOW})`,
  timeWindow: `use "window" (${WINDOW})`,
  duration: `use "window" (${WINDOW}; rate-limiter-flexible's duration is in seconds, sluice's numbers in ms)`,
};

/**
 * A rate as an unnamed policy's default name, `<count>-per-<duration>` ('5-per-1s', '100-per-15m'):
 * it tells a client reading the headers what the policy allows, and tells apart the policies of a
 * limiter that differ in it. Always a valid name (see policyName).
 */
export function rateName(count: number, ms: number): string {
  return `${count}-per-${formatDuration(ms)}`;
}
