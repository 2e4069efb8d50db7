import { InvalidArgumentError, InvalidOptionError } from '../core/errors.js';
import { callHook, warn } from '../core/host.js';
import type { LimitOptions, Operation, Policy, StoreWatcher } from '../core/types.js';
import type { EnginePolicy } from '../engine/algorithm.js';
import type { Arg, Reply, Script } from '../engine/script.js';
import type { Store } from '../engine/store.js';
import { Deciding, Settling, type Answer, type DecidingMethod, type Outages } from './attempt.js';
import { Deadlines } from '../core/deadlines.js';
import { storeErrorPolicy, storeWatcher, timeoutOption } from './failure-options.js';

export type { FailureOptions, StoreErrorPolicy } from './failure-options.js';
export type { Answer, DecidingMethod } from './attempt.js';

export interface FailureGuard {
  /**
   * Asks the store within the timeout and answers with its reply, read as a decision; if the store
   * fails, answers by `onStoreError` (a fallback limiter is asked `method` for `key` at `cost`),
   * saying why.
   */
  decide<T>(
    method: DecidingMethod,
    policies: readonly Policy[],
    script: Script,
    keys: readonly string[],
    args: readonly Arg[],
    answer: Answer<T>,
    key: string,
    cost: LimitOptions['cost'],
  ): Promise<T>;
  /** Runs a store call that has no decision to fall back on (reset): within the timeout, or a StoreError. */
  settle(operation: Operation, script: Script, keys: readonly string[], args: readonly Arg[]): Promise<Reply>;
  /** Adds a watcher of this guard's outages besides the limiter's own `onOutage` and `onRecovery`. */
  watch(watcher: StoreWatcher): void;
}

/**
 * Guards the calls to `store` of a limiter of `policies`: reads `timeout`, `onStoreError`,
 * `onOutage` and `onRecovery` from its options.
 */
export function failureGuard(
  options: Record<string, unknown>,
  policies: readonly EnginePolicy[],
  store: Store,
): FailureGuard {
  const timeoutMs = timeoutOption(options.timeout);
  const onStoreError = storeErrorPolicy(options.onStoreError, policies);
  const own = storeWatcher(options, InvalidOptionError);
  const watchers: StoreWatcher[] = [own];
  let outage: { since: number; failures: number } | undefined;

  const outages: Outages = {
    store,
    deadlines: new Deadlines(timeoutMs),
    unreachable: store.unreachable,
    onStoreError,
    recovered() {
      if (!outage) return;
      const { since, failures } = outage;
      outage = undefined;
      const recovery = { failures, downForMs: Date.now() - since };
      for (const watcher of watchers) callHook('onRecovery', watcher.onRecovery, () => recovery, watcher);
    },
    failed(operation, reason, error) {
      outage ??= { since: Date.now(), failures: 0 };
      outage.failures++;
      const failure = { operation, reason, error, failures: outage.failures };
      for (const watcher of watchers) callHook('onOutage', watcher.onOutage, () => failure, watcher);
      // Told to no one who reads it, an outage still reaches the logs: once, when it begins.
      if (!own.onOutage && outage.failures === 1) {
        const policy = typeof onStoreError === 'string' ? `'${onStoreError}'` : 'the fallback limiter';
        warn(`${error.message} (${reason}); answering ${policy} until it recovers`, { code: 'SLUICE_STORE_FAILED' });
      }
    },
  };

  return {
    decide(method, policies, script, keys, args, answer, key, cost) {
      return new Deciding(outages, method, policies, answer, key, cost).run(script, keys, args);
    },
    settle(operation, script, keys, args) {
      return new Settling(outages, operation).run(script, keys, args);
    },
    watch(watcher) {
      if (typeof watcher !== 'object' || watcher === null)
        throw new InvalidArgumentError('watcher', watcher, 'an object with onOutage and/or onRecovery functions');
      // Kept as given, so its callbacks are called as its methods (a class instance keeps its this).
      watchers.push(storeWatcher(watcher, InvalidArgumentError, 'watcher.'));
    },
  };
}
