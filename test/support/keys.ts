import type { Limiter } from '../../src/core/types.js';

/** The Redis key of `limiter`'s policy number `index` (its first by default) for `key`. */
export function policyKey(limiter: Limiter, key = 'k', index = 0): string {
  const found = limiter.storageKeys(key).policies[index];
  if (found === undefined) throw new RangeError(`the limiter has no policy ${index}`);
  return found;
}
