import { setTimeout as sleep } from 'node:timers/promises';
import { localRun, type Store } from '../stores/store.js';
import { parseDuration, type Duration } from './duration.js';
import { CostExceedsLimitError, InvalidArgumentError, InvalidOptionError, WrongMethodError } from './errors.js';
import { bindingPolicy } from './binding.js';
import { DeniedCache, type DeniedCacheOptions } from './denied-cache.js';
import { failureGuard, type FailureOptions } from './failure.js';
import { callKeys, callSuffixes, clientId, partName, stemmed, validKey, validPrefix } from './keys.js';
import { compiled, scriptArgs, scriptFor, type Op } from './script.js';
import type { Arg, Decision, Policy, PolicyDecision, Reply } from './types.js';
import { nestedOptions, optionsObject, positiveInteger, type PeerNames } from './validate.js';

export interface LimiterOptions extends FailureOptions {
  /** Where state lives: redisStore(client) or memoryStore(). */
  store: Store;
  /** What is allowed: one policy, or several decided together (admitted only if all admit). */
  policy: Policy | readonly Policy[];
  /** Namespaces this limiter's keys (default 'sluice'). No braces or spaces. */
  prefix?: string;
  /** Dry run: decide and count as usual, but always allow, marking would-be denials `shadowDenied`. */
  shadow?: boolean;
  /** The penalty box: after `after` denials in a row, block the key for `block`. */
  penalty?: { after: number; block: Duration };
  /** Answers from memory, without the store, cost-1 requests certain to be denied (see docs/performance.md). */
  deniedCache?: DeniedCacheOptions;
}

export interface LimitOptions {
  /** How many units this request uses (default 1). A whole number from 1 to the policy's limit. */
  cost?: number;
  /** Decide this call under other policies (a paid tier, a dynamic limit); the key's state is shared. */
  policy?: Policy | readonly Policy[];
}

export interface WaitOptions extends LimitOptions {
  /** Give up (resolve with the denial) when the wait would end later than this. Default: no limit. */
  timeout?: Duration;
  /** Aborting, before the call or during the wait, rejects with the signal's reason itself. */
  signal?: AbortSignal;
}

/** A slot taken by acquire() under a concurrency policy. */
export interface Lease extends Decision {
  /** Gives the slot back. Resolves false if it was not held (already released, expired, or denied). */
  release(): Promise<boolean>;
  /** Holds the slot for `ms` more from now (default: the policy's leaseMs). False if no longer held. */
  extend(ms?: Duration): Promise<boolean>;
}

export interface Limiter {
  readonly policies: readonly Policy[];
  /** The first policy (the only one, for most limiters). */
  readonly policy: Policy;
  readonly prefix: string;
  /** Decides one request and counts it if admitted. Resolves whether allowed or denied. */
  limit(key: string, options?: LimitOptions): Promise<Decision>;
  /** What a request of cost 1 would get now. Consumes nothing, writes nothing. */
  peek(key: string, options?: Pick<LimitOptions, 'policy'>): Promise<Decision>;
  /** Decides several keys at once: every request is sent before any answer is awaited. */
  limitMany(keys: readonly string[], options?: LimitOptions): Promise<Decision[]>;
  /** Forgets this key's state, blocks included. */
  reset(key: string): Promise<void>;
  /** Gives `cost` units back (a request that turned out not to count). Never creates state or exceeds the limit. */
  refund(key: string, cost?: number, options?: Pick<LimitOptions, 'policy'>): Promise<boolean>;
  /** Denies every request of this key for `duration`, without touching its counters. */
  block(key: string, duration: Duration): Promise<void>;
  /** Waits exactly as long as the limit demands, then takes the units; see WaitOptions. */
  waitFor(key: string, options?: WaitOptions): Promise<Decision>;
  /** Takes a slot of the limiter's concurrency policy; release it when the work is done. */
  acquire(key: string, options?: LimitOptions): Promise<Lease>;
}

function isStore(value: unknown): value is Store {
  return typeof value === 'object' && value !== null && typeof (value as Store).run === 'function';
}

function isPolicy(value: unknown): value is Policy {
  return typeof value === 'object' && value !== null && typeof (value as Policy).kind === 'object' && Array.isArray((value as Policy).params);
}

function policyList(value: unknown, Invalid: typeof InvalidOptionError | typeof InvalidArgumentError): readonly Policy[] {
  const list = Array.isArray(value) ? (value as unknown[]) : [value];
  if (list.length === 0 || !list.every(isPolicy)) {
    throw new Invalid('policy', value, 'a policy such as fixedWindow({ limit: 5, window: "1s" }), or a non-empty array of them');
  }
  // Headers, problem bodies and decisions tell policies apart by name alone.
  const names = list.map((p) => p.name);
  const repeated = names.find((name, i) => names.indexOf(name) !== i);
  if (repeated !== undefined) throw new Invalid('policy', value, `policies with distinct names; "${repeated}" names two of them (give each its own with { name })`);
  return list;
}

function validCost(cost: unknown, policies: readonly Policy[]): number {
  if (cost === undefined) return 1;
  if (typeof cost !== 'number' || !Number.isInteger(cost) || cost < 1) throw new InvalidArgumentError('cost', cost, 'a whole number of at least 1');
  const tightest = Math.min(...policies.map((p) => p.maxCost));
  if (cost > tightest) throw new CostExceedsLimitError(cost, tightest);
  return cost;
}

/** A promise for what `start` returns, or rejected with what it throws: bad input rejects, as the API promises. */
function promised<T>(start: () => Promise<T>): Promise<T> {
  try {
    return start();
  } catch (error) {
    return Promise.reject(error);
  }
}

function callOptions<T extends object>(value: T | undefined): Partial<T> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null) throw new InvalidArgumentError('options', value, 'an object such as { cost: 2 }');
  return value;
}

/**
 * limitMany through a limiter's `limit` (its own, or an observed one): every key is checked before
 * anything is sent, so a bad key counts nothing; the rest are asked at once (one batch in Redis).
 */
export async function limitEach(limit: Limiter['limit'], keys: unknown, limitOptions?: LimitOptions): Promise<Decision[]> {
  if (!Array.isArray(keys)) throw new InvalidArgumentError('keys', keys, 'an array of keys');
  keys.forEach(validKey);
  return Promise.all(keys.map((key: string) => limit(key, limitOptions)));
}

/** waitFor through a limiter's `limit` (its own, or an observed one, which then sees every attempt). */
export async function waitThrough(limit: Limiter['limit'], key: string, waitOptions?: WaitOptions): Promise<Decision> {
  const { timeout, signal, ...limitOptions } = callOptions(waitOptions);
  const timeoutMs = timeout === undefined ? Infinity : parseDuration('timeout', timeout, 1, InvalidArgumentError);
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new InvalidArgumentError('signal', signal, 'an AbortSignal');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    signal?.throwIfAborted();
    const decision = await limit(key, limitOptions);
    if (decision.allowed || Date.now() + decision.retryAfterMs > deadline) return decision;
    try {
      await sleep(decision.retryAfterMs, undefined, signal ? { signal } : undefined);
    } catch (error) {
      // An abort during the wait rejects with the signal's reason, as one before the call does
      // (sleep rejects with an AbortError that holds the reason only as its cause).
      signal?.throwIfAborted();
      throw error;
    }
  }
}

/** Each policy's numbers, and the decision: the numbers of the binding policy (core/binding.ts). */
function decide(reply: Reply, policies: readonly Policy[]): Decision {
  const allowed = reply[0] === 1;
  const perPolicy: PolicyDecision[] = policies.map((policy, i) => {
    const at = 3 + i * 5;
    return {
      name: policy.name,
      algorithm: policy.algorithm,
      limit: policy.limit,
      windowMs: policy.windowMs,
      allowed: reply[at] === 1,
      remaining: reply[at + 1] ?? 0,
      resetAfterMs: reply[at + 2] ?? 0,
      retryAfterMs: reply[at + 3] ?? 0,
    };
  });
  const binding = bindingPolicy(perPolicy);
  const blockedForMs = reply[2] ?? 0;
  const decision: { -readonly [K in keyof Decision]: Decision[K] } = {
    allowed,
    limit: binding.limit,
    remaining: binding.remaining,
    resetAfterMs: binding.resetAfterMs,
    retryAfterMs: allowed ? 0 : binding.retryAfterMs,
    policies: perPolicy,
  };
  if (blockedForMs > 0) decision.blockedForMs = blockedForMs;
  return decision;
}

/** The suffixes of a call's Redis keys and the memory store's names for the same parts. */
function layoutOf(prefix: string, list: readonly Policy[], withStrikes: boolean) {
  const suffixes = callSuffixes(list, withStrikes);
  return { suffixes, parts: suffixes.map((suffix) => partName(prefix, suffix)) };
}

/** What consume() sent for acquire(): the policies and cost, and the store's reply if it answered. */
interface Sent {
  list: readonly Policy[];
  cost: number;
  reply?: Reply;
}

const LIMITER_OPTIONS = ['store', 'policy', 'prefix', 'shadow', 'penalty', 'deniedCache', 'timeout', 'onStoreError', 'hooks'];

const POLICY_INSTEAD = 'use "policy": a policy such as fixedWindow({ limit: 5, window: "1s" }), or an array of them';

/** rate-limiter-flexible's and express-rate-limit's names for what createLimiter takes otherwise. */
const LIMITER_PEER_NAMES: PeerNames = {
  points: POLICY_INSTEAD,
  duration: POLICY_INSTEAD,
  limit: POLICY_INSTEAD,
  max: POLICY_INSTEAD,
  windowMs: POLICY_INSTEAD,
  policies: POLICY_INSTEAD,
  keyPrefix: 'use "prefix"',
  storeClient: 'use "store": redisStore(client)',
  blockDuration: 'use "penalty": { after: denials in a row, block: a duration }',
  insuranceLimiter: 'use "onStoreError": a fallback limiter',
  inMemoryBlockOnConsumed: 'use "deniedCache": { maxKeys }',
};

/** Ties policies, a store and a key prefix together. Bad options throw here, not on the first request. */
export function createLimiter(options: LimiterOptions): Limiter {
  const o = optionsObject('createLimiter', options, LIMITER_OPTIONS, LIMITER_PEER_NAMES);
  if (!isStore(o.store)) throw new InvalidOptionError('store', o.store, 'a store: redisStore(client) or memoryStore()');
  const store = o.store;
  const policies = policyList(o.policy, InvalidOptionError);
  const prefix = validPrefix(o.prefix);
  if (o.shadow !== undefined && typeof o.shadow !== 'boolean') throw new InvalidOptionError('shadow', o.shadow, 'true or false');
  const shadow = o.shadow === true;
  const guard = failureGuard(o);
  // A concurrency slot can be released at any moment, so its denials cannot be cached.
  const denied = o.deniedCache === undefined || policies.some((p) => p.algorithm === 'concurrency') ? undefined : new DeniedCache(o.deniedCache);
  let penalty = { strikes: 0, blockMs: 0 };
  if (o.penalty !== undefined) {
    const p = nestedOptions('penalty', o.penalty, ['after', 'block']);
    penalty = { strikes: positiveInteger('penalty.after', p.after), blockMs: parseDuration('penalty.block', p.block) };
  }

  const withStrikes = penalty.strikes > 0;
  const runLocally = localRun(store);
  const ownLayout = layoutOf(prefix, policies, withStrikes);
  const layout = (list: readonly Policy[]) => (list === policies ? ownLayout : layoutOf(prefix, list, withStrikes));
  const keysOf = (id: string, list: readonly Policy[]) => stemmed(prefix, id, layout(list).suffixes);
  // The arguments of the limiter's own calls (limit, peek, refund), built once per op and cost
  // (for the first 64 costs of each): equal calls share one array, which the Redis store then
  // sends once per batch, and which the twin and the Lua read once.
  const ownArgs = new Map<Op, Map<number, readonly string[]>>();

  function argsOf(list: readonly Policy[], op: Op, cost: number, target: number, ms: number): readonly Arg[] {
    const own = list === policies && target === 0 && ms === 0;
    const known = own ? ownArgs.get(op)?.get(cost) : undefined;
    if (known !== undefined) return known;
    const args = scriptArgs({ op, cost, target, ms, penalty, policies: list });
    if (!own) return args;
    let byCost = ownArgs.get(op);
    if (byCost === undefined) ownArgs.set(op, (byCost = new Map()));
    const shared = args.map(String);
    if (byCost.size < 64) byCost.set(cost, shared);
    return shared;
  }

  /** One guarded store call: it counts nothing if it reaches the store after `validForMs`. */
  function run(validForMs: number, id: string, list: readonly Policy[], op: Op, cost = 1, target = 0, ms = 0): Promise<Reply> {
    return store.run(compiled(list).script, keysOf(id, list), argsOf(list, op, cost, target, ms), validForMs);
  }

  /**
   * A limit or peek decision. A local store answers at once and cannot fail; any other store is
   * asked through the failure guard. `sent` learns the store's reply, if it answered.
   */
  function decideBy(id: string, list: readonly Policy[], op: 'limit' | 'peek', cost: number, fallback: (limiter: Limiter) => Promise<Decision>, sent?: Sent) {
    if (runLocally) {
      const reply = runLocally(id, layout(list).parts, compiled(list).script, argsOf(list, op, cost, 0, 0));
      if (sent) sent.reply = reply;
      return Promise.resolve(decide(reply, list));
    }
    return guard.decide(
      list,
      (validForMs) =>
        run(validForMs, id, list, op, cost).then((reply) => {
          if (sent) sent.reply = reply;
          return decide(reply, list);
        }),
      fallback,
    );
  }

  function policiesFor(value: unknown): readonly Policy[] {
    return value === undefined ? policies : policyList(value, InvalidArgumentError);
  }

  const ownLeases = policies.some((p) => p.algorithm === 'concurrency');
  const shadowed = (decision: Decision): Decision => ({ ...decision, allowed: true, retryAfterMs: 0, shadow: true, shadowDenied: !decision.allowed });

  /** Decides and counts one request; `sent` learns what was asked, and the store's reply if it answered. Throws on bad input. */
  function consume(key: string, options: LimitOptions | undefined, leases: boolean, sent?: Sent): Promise<Decision> {
    const k = validKey(key);
    const { cost: rawCost, policy } = callOptions(options);
    const list = policiesFor(policy);
    const cost = validCost(rawCost, list);
    if (sent) Object.assign(sent, { list, cost });
    if (leases !== (list === policies ? ownLeases : list.some((p) => p.algorithm === 'concurrency'))) {
      throw new WrongMethodError(leases ? 'acquire() needs a concurrency policy' : 'a concurrency policy takes slots with acquire(), which returns a lease to release');
    }
    // Only the limiter's own policies, at cost 1, go through the denied-key cache.
    const cache = denied && cost === 1 && policy === undefined ? denied : undefined;
    const cached = cache?.lookup(k);
    if (cached) return Promise.resolve(shadow ? shadowed(cached) : cached);
    const sentAt = cache?.now() ?? 0;
    const fallback = (other: Limiter) => (leases ? other.acquire(k, { cost }) : other.limit(k, { cost }));
    let decision = decideBy(clientId(k), list, 'limit', cost, fallback, sent);
    if (cache) {
      decision = decision.then((made) => {
        cache.learn(k, made, sentAt);
        return made;
      });
    }
    return shadow ? decision.then(shadowed) : decision;
  }

  const limiter: Limiter = {
    policies,
    policy: policies[0] as Policy,
    prefix,
    limit(key, limitOptions) {
      return promised(() => consume(key, limitOptions, false));
    },
    limitMany: (keys, limitOptions) => limitEach(limiter.limit, keys, limitOptions),
    async peek(key, peekOptions) {
      const k = validKey(key);
      const list = policiesFor(callOptions(peekOptions).policy);
      return decideBy(clientId(k), list, 'peek', 1, (fallback) => fallback.peek(k));
    },
    async reset(key) {
      const k = validKey(key);
      denied?.forget(k);
      // Every key of the client, the strikes key included even without a penalty box: an earlier
      // configuration with one may have left strikes.
      const keys = callKeys(prefix, k, policies, true);
      await guard.settle((validForMs) => store.run(compiled(policies).script, keys, argsOf(policies, 'reset', 1, 0, 0), validForMs));
    },
    async refund(key, cost = 1, refundOptions) {
      const k = validKey(key);
      const list = policiesFor(callOptions(refundOptions).policy);
      if (!Number.isSafeInteger(cost) || cost < 1) throw new InvalidArgumentError('cost', cost, `a whole number from 1 to ${Number.MAX_SAFE_INTEGER}`);
      denied?.forget(k);
      return (await guard.settle((validForMs) => run(validForMs, clientId(k), list, 'refund', cost)))[0] === 1;
    },
    async block(key, duration) {
      const k = validKey(key);
      const ms = parseDuration('duration', duration, 1, InvalidArgumentError);
      denied?.forget(k);
      await guard.settle((validForMs) => run(validForMs, clientId(k), policies, 'block', 1, ms));
    },
    waitFor: (key, waitOptions) => waitThrough(limiter.limit, key, waitOptions),
    async acquire(key, acquireOptions) {
      const sent: Sent = { list: policies, cost: 1 };
      const decision = await consume(key, acquireOptions, true, sent);
      const { reply, list, cost } = sent;
      // Without the store's reply, the decision came from onStoreError: a fallback limiter's lease
      // is its own to release, and 'allow' or 'deny' took no slot.
      if (reply === undefined && 'release' in decision) return decision as Lease;
      const keys = keysOf(clientId(key), list);
      const first = withStrikes ? 2 : 1;
      // Each concurrency policy that took a slot: its keys and its lease's first id (the reply's extra field).
      const held = list.flatMap((policy, i) => {
        const id = reply?.[3 + i * 5 + 4] ?? 0;
        return policy.algorithm === 'concurrency' && id > 0 ? [{ policy, id, keys: [...keys.slice(0, first), keys[first + i]] as string[] }] : [];
      });
      const onEach = async (op: Op, msFor: (policy: Policy) => number) => {
        const replies = await Promise.all(
          held.map(({ policy, id, keys }) =>
            guard.settle((validForMs) =>
              store.run(scriptFor([policy.kind]), keys, scriptArgs({ op, cost, target: id, ms: msFor(policy), penalty, policies: [policy] }), validForMs),
            ),
          ),
        );
        return replies.some((r) => r[0] === 1);
      };
      return {
        ...decision,
        release: () => onEach('release', () => 0),
        async extend(ms?: Duration) {
          const extendMs = ms === undefined ? undefined : parseDuration('ms', ms, 1, InvalidArgumentError);
          return onEach('extend', (policy) => extendMs ?? policy.windowMs);
        },
      };
    },
  };
  return limiter;
}
