import type { Store } from '../stores/store.js';
import { DeniedCache, type DeniedCacheOptions } from './denied-cache.js';
import { CostExceedsLimitError, InvalidArgumentError, InvalidOptionError } from './errors.js';
import { storageKey, validKey, validPrefix } from './keys.js';
import type { Decision, Mode, Policy, Reply } from './types.js';
import { optionsObject } from './validate.js';

export interface LimiterOptions {
  /** Where state lives: redisStore(client) or memoryStore(). */
  store: Store;
  /** What is allowed: fixedWindow(), slidingLog() or tokenBucket(). */
  policy: Policy;
  /** Namespaces this limiter's keys (default 'sluice'). No braces or spaces. */
  prefix?: string;
  /** Answers from memory, without the store, cost-1 requests certain to be denied (see docs/performance.md). */
  deniedCache?: DeniedCacheOptions;
}

export interface LimitOptions {
  /** How many units this request uses (default 1). A whole number from 1 to the policy's limit. */
  cost?: number;
}

export interface Limiter {
  readonly policy: Policy;
  readonly prefix: string;
  /** Decides one request and counts it if admitted. Resolves whether allowed or denied. */
  limit(key: string, options?: LimitOptions): Promise<Decision>;
  /** What a request of cost 1 would get now. Consumes nothing, writes nothing. */
  peek(key: string): Promise<Decision>;
  /** Decides several keys at once: every request is sent before any answer is awaited. */
  limitMany(keys: readonly string[], options?: LimitOptions): Promise<Decision[]>;
  /** Forgets this key's state. */
  reset(key: string): Promise<void>;
}

function isStore(value: unknown): value is Store {
  return typeof value === 'object' && value !== null && typeof (value as Store).run === 'function' && typeof (value as Store).delete === 'function';
}

function isPolicy(value: unknown): value is Policy {
  return typeof value === 'object' && value !== null && typeof (value as Policy).script === 'object' && typeof (value as Policy).args === 'function';
}

function validCost(options: LimitOptions | undefined, limit: number): number {
  if (options === undefined) return 1;
  if (typeof options !== 'object' || options === null) throw new InvalidArgumentError('options', options, 'an object such as { cost: 2 }');
  const cost = options.cost ?? 1;
  if (typeof cost !== 'number' || !Number.isInteger(cost) || cost < 1) {
    throw new InvalidArgumentError('cost', cost, 'a whole number of at least 1');
  }
  if (cost > limit) throw new CostExceedsLimitError(cost, limit);
  return cost;
}

function decision([allowed, remaining, resetAfterMs, retryAfterMs]: Reply, limit: number): Decision {
  return { allowed: allowed === 1, limit, remaining, resetAfterMs, retryAfterMs };
}

/** Ties a policy, a store and a key prefix together. Bad options throw here, not on the first request. */
export function createLimiter(options: LimiterOptions): Limiter {
  const o = optionsObject('createLimiter', options);
  if (!isStore(o.store)) throw new InvalidOptionError('store', o.store, 'a store: redisStore(client) or memoryStore()');
  if (!isPolicy(o.policy)) throw new InvalidOptionError('policy', o.policy, 'a policy: fixedWindow(), slidingLog() or tokenBucket()');
  const store = o.store;
  const policy = o.policy;
  const prefix = validPrefix(o.prefix);
  const denied = o.deniedCache === undefined ? undefined : new DeniedCache(o.deniedCache);

  const toDecision = (reply: Reply): Decision => decision(reply, policy.limit);

  function run(key: string, cost: number, mode: Mode): Promise<Decision> {
    return store.run(policy.script, [storageKey(prefix, key, policy.keySuffix)], policy.args(cost, mode)).then(toDecision);
  }

  async function throughCache(cache: DeniedCache, key: string): Promise<Decision> {
    const cached = cache.lookup(key);
    if (cached !== undefined) return cached;
    const sentAt = cache.now();
    const answer = await run(key, 1, 'consume');
    cache.learn(key, answer, sentAt);
    return answer;
  }

  function consume(key: string, cost: number): Promise<Decision> {
    return denied === undefined || cost !== 1 ? run(key, cost, 'consume') : throughCache(denied, key);
  }

  return {
    policy,
    prefix,
    // Not async, which saves a promise per decision; a bad argument still rejects, never throws.
    limit(key, limitOptions) {
      try {
        return consume(validKey(key), validCost(limitOptions, policy.limit));
      } catch (error) {
        return Promise.reject(error);
      }
    },
    async limitMany(keys, limitOptions) {
      if (!Array.isArray(keys)) throw new InvalidArgumentError('keys', keys, 'an array of keys');
      // Every argument is checked before anything is sent, so a bad key counts nothing.
      const valid = keys.map(validKey);
      const cost = validCost(limitOptions, policy.limit);
      return Promise.all(valid.map((key) => consume(key, cost)));
    },
    async peek(key) {
      return run(validKey(key), 1, 'peek');
    },
    async reset(key) {
      denied?.forget(validKey(key));
      await store.delete([storageKey(prefix, validKey(key), policy.keySuffix)]);
    },
  };
}
