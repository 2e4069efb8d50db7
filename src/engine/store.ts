import type { StoreError } from '../core/errors.js';
import type { Arg, Reply, Script } from './script.js';

/**
 * Where state lives. A store runs a script's atomic step on some keys and knows nothing about
 * which algorithm the script is: Redis runs its Lua, memory runs its twin.
 */
export interface Store {
  /**
   * Runs one atomic step. Rejects with a StoreError when the store fails. With a `deadline` (a
   * performance.now() time), the step must take effect before it or not at all: from then on the
   * caller may answer by its failure policy, so a step that ran later would count a request twice
   * (or one that was refused). An absolute time, read once by the caller, not a span that the store
   * would add to a later reading of its own. A store that answers at once may ignore it.
   */
  run(script: Script, keys: readonly string[], args: readonly Arg[], deadline?: number): Promise<Reply>;
  /**
   * Present on a store that decides in this process, at once, and cannot fail (the memory store):
   * the same step as `run`, asked by the client's id and the names of its state's parts instead of
   * key strings built per call, and without the timeout and failure policy that guard a store
   * across a network. Not enumerable, so a copy of the store with its own `run` (a wrapper that
   * fails on purpose, say) is asked through that `run`.
   */
  readonly runLocal?: LocalRun;
  /**
   * Present on a store whose keys live in slots (a Redis Cluster): the slot of a key. The keys of
   * one step must share a slot there; a store without it takes any keys in one step.
   */
  readonly slotOf?: (key: string) => number;
  /**
   * Present on a store whose client says why it cannot reach its server (ioredis's connection
   * errors): that reason while it holds (a refused connection), else undefined. A call that gets no
   * reply meanwhile fails with it, a store error, rather than as a timeout.
   */
  readonly unreachable?: () => StoreError | undefined;
}

/**
 * A local store's step: by the client's id and its parts' names (see Store.runLocal). Its reply is
 * valid until the store's next step, which may reuse it: it is read at once.
 */
export type LocalRun = (id: string, parts: readonly string[], script: Script, args: readonly Arg[]) => Reply;

/** Gives `store` its local step, not enumerable (see Store.runLocal). */
export function asLocalStore<S extends Store>(store: S, runLocal: LocalRun): S {
  return Object.defineProperty(store, 'runLocal', { value: runLocal });
}
