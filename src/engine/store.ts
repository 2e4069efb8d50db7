import type { Arg, Reply, Script } from '../core/types.js';

/**
 * Where state lives. A store runs a script's atomic step on some keys and knows nothing about
 * which algorithm the script is: Redis runs its Lua, memory runs its twin.
 */
export interface Store {
  /**
   * Runs one atomic step. Rejects with a StoreError when the store fails. With `validForMs`, the
   * step must take effect within that many ms from now or not at all: the caller stops waiting
   * then and answers by its failure policy, so a step that ran later would count a request twice
   * (or one that was refused). A store that answers at once may ignore it.
   */
  run(script: Script, keys: readonly string[], args: readonly Arg[], validForMs?: number): Promise<Reply>;
}

/** How a limiter asks a local store for one atomic step: by the client's id and its parts' names. */
export type LocalRun = (id: string, parts: readonly string[], script: Script, args: readonly Arg[]) => Reply;

// Known by identity: a wrapper around a local store (a spread copy with its own `run`, say) is not
// one, so its `run` is called as for any store.
const localRuns = new WeakMap<Store, LocalRun>();

/**
 * Marks a store that decides in this process, at once, and cannot fail (the memory store). A
 * limiter asks it directly, by the client's id and the names of its state's parts, without building
 * a key string per call, and without the timeout and failure policy that guard a store across a
 * network.
 */
export function asLocalStore<S extends Store>(store: S, run: LocalRun): S {
  localRuns.set(store, run);
  return store;
}

/** The direct way to ask `store`, if it is a local store. */
export function localRun(store: Store): LocalRun | undefined {
  return localRuns.get(store);
}
