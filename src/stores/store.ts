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
