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
 * `admit` and `keep` among them:
 *
 *   ALG.<id>.decide(key, cost, now, p, peek, state) -> allowed, remaining, reset, retry
 *   ALG.<id>.admit(key, cost, now, p, state)  -> remaining, reset, extra
 *   ALG.<id>.keep(key, cost, now, p, state)
 *   ALG.<id>.refund(key, cost, now, p)       -> true if it gave anything back
 *   ALG.<id>.release(key, cost, now, p, id)  -> true if the lease was held (concurrency only)
 *   ALG.<id>.extend(key, cost, now, p, id, ms) -> true if the lease was extended (concurrency only)
 *
 * `p` holds the policy's numeric parameters; `now` is the Redis server's time in ms. `state` is
 * the Lua's form of the twin's closures: decide leaves in it what admit or keep needs of what it
 * read. It is one table per policy, reused by the requests of a batch, so a decision allocates no
 * table or closure (each measured in Redis's instruction count).
 *
 * Redis 7.0 turns a number given to `redis.call` into its argument with `%.17g` (2,200 to 3,300
 * instructions by its length, about what a whole `GET` costs): constants go as strings ('-1',
 * not -1), the cost as ARGV's text (`state.costText`), and a computed integer through `digits(n)`
 * (string.format('%d'), about a third less), once however many arguments it is. Concatenating a
 * number ('(' .. n) costs as much as formatting it (Lua's own `%.14g`).
 *
 * State may hold anything (a hand or another program can write it): a number is read through
 * `whole(value)` (nil unless a whole number from 0 to 2^53), and the first command that reads a value
 * through `redis.pcall` (a key of another type replies an error instead of failing the script). Junk
 * reads as empty state, and `admit` or `keep` writes over it with a TTL (docs/algorithms.md).
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
  return algorithm;
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
