import {
  CostExceedsLimitError,
  InvalidArgumentError,
  InvalidOptionError,
  WrongMethodError,
  type StoreError,
} from '../core/errors.js';
import { callKeys, validKey, validPrefix } from '../core/keys.js';
import type { Decision, FailureReason, Policy, PolicyDecision, StoreWatcher } from '../core/types.js';
import { enginePolicy, type EnginePolicy } from '../engine/algorithm.js';
import { compiled, scriptArgs } from '../engine/driver.js';
import type { Store } from '../engine/store.js';
import { failureGuard, type FailureOptions } from './failure.js';

/** One client's part in a joint decision: its key, its policies and what the request costs it. */
export interface JointPart {
  readonly key: string;
  readonly policies: readonly Policy[];
  readonly cost: number;
}

/** What a joint call decided. */
export interface JointDecision {
  /** Whether the request was admitted: every part under all of its policies. Only then was it counted. */
  readonly allowed: boolean;
  /** Each part's policies, in the order of the parts: whether each alone would admit, and its numbers. */
  readonly parts: readonly (readonly PolicyDecision[])[];
  /** Set when the store failed and the failure policy decided, as on a limiter's decision. */
  readonly reason?: FailureReason;
  readonly error?: StoreError;
}

export interface JointLimiterOptions extends FailureOptions {
  readonly store: Store;
  readonly prefix?: string;
  /** 'allow' or 'deny': a fallback limiter decides one key, not several. */
  readonly onStoreError?: 'allow' | 'deny';
}

/**
 * Decides the limits of several clients as one atomic step: admitted only if every part is under
 * all of its policies, then counted in all; a denial counts nothing. The parts' keys are their
 * limiters' (same prefix), so a part may be decided here and alone by turns. No penalty box; the
 * first part's block is the one a call honours.
 */
export interface JointLimiter {
  /** Whether the store can decide these parts in one step: on a Redis Cluster only keys of one slot can. */
  canDecide(parts: readonly JointPart[]): boolean;
  /** Counts the request in every part if all admit it. `peek` asks without counting. */
  limit(parts: readonly JointPart[], op?: 'limit' | 'peek'): Promise<JointDecision>;
  /** Adds a watcher of the store's outages, as a limiter's watchStore does. */
  watchStore(watcher: StoreWatcher): void;
}

const NO_PENALTY = { strikes: 0, blockMs: 0 };

const asDecided = (decision: Decision): Decision => decision;

export function createJointLimiter(options: JointLimiterOptions): JointLimiter {
  const { store } = options;
  const prefix = validPrefix(options.prefix);
  if (typeof options.onStoreError === 'object')
    throw new InvalidOptionError(
      'onStoreError',
      options.onStoreError,
      "'allow' or 'deny': a fallback limiter decides one key",
    );
  // Refused above, a fallback limiter has no policies of this limiter's to be checked against.
  // The guard is not told why the store is unreachable (Store.unreachable): a joint call that gets
  // no reply fails as a timeout.
  const guarded: Store = { run: store.run.bind(store) };
  const guard = failureGuard(options as unknown as Record<string, unknown>, [], guarded);

  /** Every key of a call: the first part's block key, then each part's policy keys. */
  function keysOf(parts: readonly JointPart[], lists: readonly (readonly EnginePolicy[])[]): string[] {
    const keys: string[] = [];
    parts.forEach((part, i) => {
      const [block, ...policyKeys] = callKeys(prefix, part.key, lists[i] as readonly EnginePolicy[]);
      if (i === 0) keys.push(block as string);
      keys.push(...policyKeys);
    });
    return keys;
  }

  function validLists(parts: readonly JointPart[]): (readonly EnginePolicy[])[] {
    const given: unknown = parts;
    if (!Array.isArray(given) || given.length === 0)
      throw new InvalidArgumentError('parts', parts, 'a non-empty array of { key, policies, cost }');
    return parts.map(({ key, policies, cost }) => {
      validKey(key);
      const list: unknown = policies;
      if (!Array.isArray(list) || list.length === 0)
        throw new InvalidArgumentError('policies', policies, 'a non-empty array of policies');
      const engine = policies.map(enginePolicy);
      if (engine.some((p) => p.kind.leases === true))
        throw new WrongMethodError('a concurrency policy takes slots with acquire(), which a joint call has not');
      if (!Number.isSafeInteger(cost) || cost < 1)
        throw new InvalidArgumentError('cost', cost, 'a whole number of at least 1');
      const tightest = Math.min(...engine.map((p) => p.maxCost));
      if (cost > tightest) throw new CostExceedsLimitError(cost, tightest);
      return engine;
    });
  }

  return {
    canDecide(parts) {
      const { slotOf } = store;
      if (slotOf === undefined) return true;
      const keys = keysOf(parts, validLists(parts));
      const slot = slotOf(keys[0] as string);
      return keys.every((key) => slotOf(key) === slot);
    },
    async limit(parts, op = 'limit') {
      const lists = validLists(parts);
      const all = lists.flat();
      const costs = lists.flatMap((list, i) => list.map(() => (parts[i] as JointPart).cost));
      const keys = keysOf(parts, lists);
      const args = scriptArgs({ op, cost: costs, target: 0, ms: 0, penalty: NO_PENALTY, policies: all });
      // No fallback limiter to ask: onStoreError is 'allow' or 'deny' (refused above otherwise).
      const decision = await guard.decide(op, all, compiled(all).script, keys, args, asDecided, '', undefined);
      let at = 0;
      return {
        allowed: decision.allowed,
        parts: lists.map((list) => decision.policies.slice(at, (at += list.length))),
        ...(decision.reason === undefined ? {} : { reason: decision.reason, error: decision.error }),
      };
    },
    watchStore: (watcher) => guard.watch(watcher),
  };
}
