import { InvalidArgumentError, InvalidOptionError, WrongMethodError, type StoreError } from '../core/errors.js';
import { callKeys, validKey, validPrefix } from '../core/keys.js';
import type { Decision, FailureReason, Policy, PolicyDecision, StoreWatcher } from '../core/types.js';
import { optionsObject } from '../core/validate.js';
import { enginePolicy, type EnginePolicy } from '../engine/algorithm.js';
import { compiled, scriptArgs } from '../engine/driver.js';
import type { Store } from '../engine/store.js';
import { validCostNumber } from './call-arguments.js';
import { failureGuard, type FailureGuard, type FailureOptions } from './failure.js';
import { isStore } from './options.js';

/** One part of a joint decision: a key, the policies it is limited by, and what the request costs it. */
export interface JointPart {
  readonly key: string;
  readonly policies: readonly Policy[];
  /** A whole number from 1 to the part's tightest limit (default 1). */
  readonly cost?: number;
}

/** What a joint call decided. */
export interface JointDecision {
  /** Whether the request was admitted: every part under all of its policies. Only then was it counted. */
  readonly allowed: boolean;
  /** Each part's policies, in the order of the parts: whether each alone would admit, and its numbers. */
  readonly parts: readonly (readonly PolicyDecision[])[];
  /** Set when the store failed and `onStoreError` decided, as on a limiter's decision. */
  readonly reason?: FailureReason;
  readonly error?: StoreError;
}

export interface JointLimiterOptions extends FailureOptions {
  /** Where state lives: redisStore(client) or memoryStore(), the store of the limiters whose keys it decides. */
  readonly store: Store;
  /** The prefix of those limiters (default 'sluice'). */
  readonly prefix?: string;
  /** 'allow' (the default) or 'deny': a fallback limiter decides one key, not several. */
  readonly onStoreError?: 'allow' | 'deny';
}

/**
 * Decides the limits of several keys as one atomic step (docs/joint.md): admitted only if every
 * part is under all of its policies, then counted in all; a denial counts nothing. A part's state
 * is that of a limiter of its policies with the same store and prefix, so a key may be decided
 * here and by that limiter by turns. No penalty box; a block (limiter.block()) of the first part's
 * key denies the call.
 */
export interface JointLimiter {
  /** Whether the store can decide these parts in one step: on a Redis Cluster, only keys of one slot. */
  canDecide(parts: readonly JointPart[]): boolean;
  /** Counts the request in every part if all admit it; rejects with InvalidArgumentError for a bad part. */
  limit(parts: readonly JointPart[]): Promise<JointDecision>;
  /** What limit() would answer now, counting nothing. */
  peek(parts: readonly JointPart[]): Promise<JointDecision>;
  /** Tells `watcher` of the store's outages and recoveries too, as a limiter's watchStore does. */
  watchStore(watcher: StoreWatcher): void;
}

const JOINT_OPTIONS = ['store', 'prefix', 'timeout', 'onStoreError', 'onOutage', 'onRecovery'];
const NO_PENALTY = { strikes: 0, blockMs: 0 };

const asDecided = (decision: Decision): Decision => decision;

/** Every key of a call: the first part's block key, then each part's policy keys. */
function keysOf(prefix: string, parts: readonly JointPart[], lists: readonly (readonly EnginePolicy[])[]): string[] {
  const keys: string[] = [];
  parts.forEach((part, i) => {
    const [block, ...policyKeys] = callKeys(prefix, part.key, lists[i] as readonly EnginePolicy[]);
    if (i === 0) keys.push(block as string);
    keys.push(...policyKeys);
  });
  return keys;
}

/** Each part's engine policies, and the cost of each policy in the order of the call. */
function validParts(parts: readonly JointPart[]): { lists: (readonly EnginePolicy[])[]; costs: number[] } {
  const given: unknown = parts;
  if (!Array.isArray(given) || given.length === 0)
    throw new InvalidArgumentError('parts', parts, 'a non-empty array of { key, policies, cost }');
  const costs: number[] = [];
  const lists = parts.map((part) => {
    if (typeof part !== 'object' || part === null)
      throw new InvalidArgumentError('part', part, 'an object { key, policies, cost }');
    validKey(part.key);
    const list: unknown = part.policies;
    if (!Array.isArray(list) || list.length === 0)
      throw new InvalidArgumentError('policies', part.policies, 'a non-empty array of policies');
    const engine = part.policies.map(enginePolicy);
    if (engine.some((p) => p.kind.leases === true))
      throw new WrongMethodError('a concurrency policy takes slots with acquire(), which a joint call has not');
    const cost = validCostNumber(part.cost, engine);
    for (let i = 0; i < engine.length; i++) costs.push(cost);
    return engine;
  });
  return { lists, costs };
}

/** The options, checked; the guard of the store's calls. */
function jointGuard(options: JointLimiterOptions): { store: Store; prefix: string; guard: FailureGuard } {
  const o = optionsObject('createJointLimiter', options, JOINT_OPTIONS);
  if (!isStore(o.store)) throw new InvalidOptionError('store', o.store, 'a store: redisStore(client) or memoryStore()');
  if (o.onStoreError !== undefined && o.onStoreError !== 'allow' && o.onStoreError !== 'deny')
    throw new InvalidOptionError(
      'onStoreError',
      o.onStoreError,
      "'allow' or 'deny': a fallback limiter decides one key",
    );
  const store = o.store;
  // The guard is not told why the store is unreachable (Store.unreachable): a joint call that gets
  // no reply fails as a timeout.
  const guarded: Store = { run: store.run.bind(store) };
  return { store, prefix: validPrefix(o.prefix), guard: failureGuard(o, [], guarded) };
}

/** A joint limiter over `store`'s keys of `prefix` (see JointLimiter); InvalidOptionError for a bad option. */
export function createJointLimiter(options: JointLimiterOptions): JointLimiter {
  const { store, prefix, guard } = jointGuard(options);

  async function decide(parts: readonly JointPart[], op: 'limit' | 'peek'): Promise<JointDecision> {
    const { lists, costs } = validParts(parts);
    const all = lists.flat();
    const keys = keysOf(prefix, parts, lists);
    const args = scriptArgs({ op, cost: costs, target: 0, ms: 0, penalty: NO_PENALTY, policies: all });
    // No fallback limiter to ask: onStoreError is 'allow' or 'deny'.
    const decision = await guard.decide(op, all, compiled(all).script, keys, args, asDecided, '', undefined);
    let at = 0;
    return {
      allowed: decision.allowed,
      parts: lists.map((list) => decision.policies.slice(at, (at += list.length))),
      ...(decision.reason === undefined ? {} : { reason: decision.reason, error: decision.error }),
    };
  }

  return {
    canDecide(parts) {
      const { slotOf } = store;
      if (slotOf === undefined) return true;
      const keys = keysOf(prefix, parts, validParts(parts).lists);
      const slot = slotOf(keys[0] as string);
      return keys.every((key) => slotOf(key) === slot);
    },
    limit: (parts) => decide(parts, 'limit'),
    peek: (parts) => decide(parts, 'peek'),
    watchStore: (watcher) => guard.watch(watcher),
  };
}
