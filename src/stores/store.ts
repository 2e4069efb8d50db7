import type { Arg, Reply, Script } from '../core/types.js';

/**
 * Where state lives. A store runs a script's atomic step on some keys and knows nothing about
 * which algorithm the script is: Redis runs its Lua, memory runs its twin.
 */
export interface Store {
  /** Runs one atomic step. Rejects with a StoreError when the store fails. */
  run(script: Script, keys: readonly string[], args: readonly Arg[]): Promise<Reply>;
  /** Forgets these keys. */
  delete(keys: readonly string[]): Promise<void>;
}

/** The method by which a limiter asks a LocalStore directly; kept off the public API. */
export const decideNow = Symbol('sluice.decideNow');

/**
 * A store that decides in this process, at once, and cannot fail (the memory store). A limiter asks
 * it directly, by the client's id and the names of its state's parts, without building a key string
 * per call, and without the timeout and failure policy that guard a store across a network.
 */
export interface LocalStore extends Store {
  [decideNow](id: string, parts: readonly string[], script: Script, args: readonly Arg[]): Reply;
}

export function isLocalStore(store: Store): store is LocalStore {
  return typeof (store as Partial<LocalStore>)[decideNow] === 'function';
}
