import { localRun, type Store } from '../stores/store.js';
import { parseDuration, type Duration } from './duration.js';
import { CostExceedsLimitError, InvalidArgumentError, InvalidOptionError, WrongMethodError } from './errors.js';
import { bindingPolicy, policyDecision } from './binding.js';
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

/**
 * A request's cost in each unit its policies count (their `counts`): `{ requests: 1, tokens: 1200 }`.
 * A unit left out costs 0 in the policies that count it.
 */
export type CostByUnit = Readonly<Record<string, number>>;

export interface LimitOptions {
  /**
   * What this request uses (default 1): a whole number from 1 to each policy's limit, taken in
   * every policy; or each unit's own (CostByUnit), from 0, at least one above 0.
   */
  cost?: number | CostByUnit;
  /** Decide this call under other policies (a paid tier, a dynamic limit); the key's state is shared. */
  policy?: Policy | readonly Policy[];
}

export interface WaitOptions extends LimitOptions {
  /** Give up (resolve with the denial) when the wait would end later than this. Default: no limit. */
  timeout?: Duration;
  /** Aborting, before the call or during the wait, rejects with the signal's reason itself. */
  signal?: AbortSignal;
}

/**
 * A request admitted at an estimate of its cost, from reserve(): once its true cost is known,
 * settle() corrects the charge. Unsettled, it stays charged at the estimate. settle and cancel
 * work detached from the reservation (the middleware takes them off it): they use no `this`.
 */
export interface Reservation extends Decision {
  /**
   * Corrects the charge to `actual` (a number for every policy, or CostByUnit; units left out
   * cost 0): gives back what the estimate took too much, as refund() does, and takes what it took
   * too little even past the limit, leaving the key in debt, denied until time pays it off (at
   * most one limit's worth of debt per policy is taken). Resolves true when this call settled the
   * reservation; false when it was settled or cancelled before, or charged nothing (denied, or
   * decided without the store). A failed settle rejects with a StoreError, changes nothing, and
   * may be retried.
   */
  settle(this: void, actual: number | CostByUnit): Promise<boolean>;
  /** Gives back the whole estimate: settle(0). */
  cancel(this: void): Promise<boolean>;
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
  refund(key: string, cost?: number | CostByUnit, options?: Pick<LimitOptions, 'policy'>): Promise<boolean>;
  /** As limit(), at an estimated cost that settle() corrects once the true cost is known; see Reservation. */
  reserve(key: string, options?: LimitOptions): Promise<Reservation>;
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
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Policy).kind === 'object' &&
    Array.isArray((value as Policy).params)
  );
}

function policyList(
  value: unknown,
  Invalid: typeof InvalidOptionError | typeof InvalidArgumentError,
): readonly Policy[] {
  const list = Array.isArray(value) ? (value as unknown[]) : [value];
  if (list.length === 0 || !list.every(isPolicy)) {
    throw new Invalid(
      'policy',
      value,
      'a policy such as fixedWindow({ limit: 5, window: "1s" }), or a non-empty array of them',
    );
  }
  // Headers, problem bodies and decisions tell policies apart by name alone.
  const names = list.map((p) => p.name);
  const repeated = names.find((name, i) => names.indexOf(name) !== i);
  if (repeated !== undefined)
    throw new Invalid(
      'policy',
      value,
      `policies with distinct names; "${repeated}" names two of them (give each its own with { name })`,
    );
  return list;
}

/** A call's cost: one for every policy, or each policy's own (from a CostByUnit). */
type Costs = number | readonly number[];

const COST_BY_UNIT = 'an object of whole numbers by unit, such as { requests: 1, tokens: 1200 }';

/**
 * Each policy's part of a CostByUnit: what its unit costs, 0 when left out. Every unit must be one a
 * policy counts (a misspelt unit would otherwise cost nothing), every amount a whole number from 0.
 */
function costsByUnit(argument: string, cost: object, policies: readonly Policy[]): number[] {
  if (Array.isArray(cost)) throw new InvalidArgumentError(argument, cost, COST_BY_UNIT);
  const units = new Set(policies.map((p) => p.counts));
  for (const [unit, amount] of Object.entries(cost)) {
    if (!units.has(unit))
      throw new InvalidArgumentError(
        `${argument}.${unit}`,
        amount,
        `the cost of a unit these policies count (${[...units].join(', ')})`,
      );
    if (!Number.isSafeInteger(amount) || (amount as number) < 0)
      throw new InvalidArgumentError(`${argument}.${unit}`, amount, 'a whole number of at least 0');
  }
  const byUnit = cost as CostByUnit;
  return policies.map((p) => byUnit[p.counts] ?? 0);
}

function validCost(cost: unknown, policies: readonly Policy[]): Costs {
  if (cost === undefined) return 1;
  if (typeof cost === 'object' && cost !== null) {
    const costs = costsByUnit('cost', cost, policies);
    if (costs.every((c) => c === 0))
      throw new InvalidArgumentError('cost', cost, 'a cost above 0 in at least one unit');
    policies.forEach((p, i) => {
      if ((costs[i] as number) > p.maxCost) throw new CostExceedsLimitError(costs[i] as number, p.maxCost);
    });
    return costs;
  }
  if (typeof cost !== 'number' || !Number.isInteger(cost) || cost < 1)
    throw new InvalidArgumentError('cost', cost, `a whole number of at least 1, or ${COST_BY_UNIT}`);
  const tightest = Math.min(...policies.map((p) => p.maxCost));
  if (cost > tightest) throw new CostExceedsLimitError(cost, tightest);
  return cost;
}

/** What refund and settle take: a number for every policy, or a CostByUnit; from 0 when `zero`, else from 1. */
function validAmount(argument: string, amount: unknown, policies: readonly Policy[], zero: boolean): Costs {
  if (typeof amount === 'object' && amount !== null) return costsByUnit(argument, amount, policies);
  const least = zero ? 0 : 1;
  if (!Number.isSafeInteger(amount) || (amount as number) < least)
    throw new InvalidArgumentError(
      argument,
      amount,
      `a whole number from ${least} to ${Number.MAX_SAFE_INTEGER}, or ${COST_BY_UNIT}`,
    );
  return amount as number;
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
  if (typeof value !== 'object' || value === null)
    throw new InvalidArgumentError('options', value, 'an object such as { cost: 2 }');
  return value;
}

/**
 * limitMany through a limiter's `limit` (its own, or an observed one): every key is checked before
 * anything is sent, so a bad key counts nothing; the rest are asked at once (one batch in Redis).
 */
export async function limitEach(
  limit: Limiter['limit'],
  keys: unknown,
  limitOptions?: LimitOptions,
): Promise<Decision[]> {
  if (!Array.isArray(keys)) throw new InvalidArgumentError('keys', keys, 'an array of keys');
  keys.forEach(validKey);
  return Promise.all(keys.map((key: string) => limit(key, limitOptions)));
}

/** waitFor through a limiter's `limit` (its own, or an observed one, which then sees every attempt). */
export async function waitThrough(limit: Limiter['limit'], key: string, waitOptions?: WaitOptions): Promise<Decision> {
  const { timeout, signal, ...limitOptions } = callOptions(waitOptions);
  const timeoutMs = timeout === undefined ? Infinity : parseDuration('timeout', timeout, 1, InvalidArgumentError);
  if (signal !== undefined && !(signal instanceof AbortSignal))
    throw new InvalidArgumentError('signal', signal, 'an AbortSignal');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    signal?.throwIfAborted();
    const decision = await limit(key, limitOptions);
    if (decision.allowed || Date.now() + decision.retryAfterMs > deadline) return decision;
    await sleep(decision.retryAfterMs, signal);
  }
}

/** Resolves after `ms`; rejects with the signal's reason once it aborts, as an abort before the call does. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const abort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', abort);
      resolve();
    }, ms);
    if (signal?.aborted) abort();
    else signal?.addEventListener('abort', abort, { once: true });
  });
}

/** Each policy's numbers, and the decision: the numbers of the binding policy (core/binding.ts). */
function decide(reply: Reply, policies: readonly Policy[]): Decision {
  const allowed = reply[0] === 1;
  const perPolicy: PolicyDecision[] = policies.map((policy, i) => {
    const at = 3 + i * 5;
    return policyDecision(policy, reply[at] === 1, reply[at + 1] ?? 0, reply[at + 2] ?? 0, reply[at + 3] ?? 0);
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
  cost: Costs;
  reply?: Reply;
}

const LIMITER_OPTIONS = [
  'store',
  'policy',
  'prefix',
  'shadow',
  'penalty',
  'deniedCache',
  'timeout',
  'onStoreError',
  'hooks',
];

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
  if (o.shadow !== undefined && typeof o.shadow !== 'boolean')
    throw new InvalidOptionError('shadow', o.shadow, 'true or false');
  const shadow = o.shadow === true;
  const guard = failureGuard(o);
  // A concurrency slot can be released at any moment, so its denials cannot be cached.
  const denied =
    o.deniedCache === undefined || policies.some((p) => p.algorithm === 'concurrency')
      ? undefined
      : new DeniedCache(o.deniedCache);
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

  function argsOf(list: readonly Policy[], op: Op, cost: Costs, target: number, ms: number): readonly Arg[] {
    if (typeof cost !== 'number') return scriptArgs({ op, cost, target, ms, penalty, policies: list });
    const own = list === policies && target === 0 && ms === 0;
    const known = own ? ownArgs.get(op)?.get(cost) : undefined;
    if (known !== undefined) return known;
    const args = scriptArgs({ op, cost, target, ms, penalty, policies: list });
    if (!own) return args;
    let byCost = ownArgs.get(op);
    if (byCost === undefined) ownArgs.set(op, (byCost = new Map<number, readonly string[]>()));
    const shared = args.map(String);
    if (byCost.size < 64) byCost.set(cost, shared);
    return shared;
  }

  /** One guarded store call: it counts nothing if it reaches the store after `validForMs`. */
  function run(
    validForMs: number,
    id: string,
    list: readonly Policy[],
    op: Op,
    cost: Costs = 1,
    target = 0,
    ms = 0,
  ): Promise<Reply> {
    return store.run(compiled(list).script, keysOf(id, list), argsOf(list, op, cost, target, ms), validForMs);
  }

  /**
   * A limit or peek decision. A local store answers at once and cannot fail; any other store is
   * asked through the failure guard. `sent` learns the store's reply, if it answered.
   */
  function decideBy(
    id: string,
    list: readonly Policy[],
    op: 'limit' | 'peek',
    cost: Costs,
    fallback: (limiter: Limiter) => Promise<Decision>,
    sent?: Sent,
  ) {
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
  const shadowed = (decision: Decision): Decision => ({
    ...decision,
    allowed: true,
    retryAfterMs: 0,
    shadow: true,
    shadowDenied: !decision.allowed,
  });

  /** Decides and counts one request; `sent` learns what was asked, and the store's reply if it answered. Throws on bad input. */
  function consume(key: string, options: LimitOptions | undefined, leases: boolean, sent?: Sent): Promise<Decision> {
    const k = validKey(key);
    const { cost: rawCost, policy } = callOptions(options);
    const list = policiesFor(policy);
    const cost = validCost(rawCost, list);
    if (sent) Object.assign(sent, { list, cost });
    if (leases !== (list === policies ? ownLeases : list.some((p) => p.algorithm === 'concurrency'))) {
      throw new WrongMethodError(
        leases
          ? 'acquire() needs a concurrency policy'
          : 'a concurrency policy takes slots with acquire(), which returns a lease to release',
      );
    }
    // Only the limiter's own policies, at cost 1, go through the denied-key cache.
    const cache = denied && cost === 1 && policy === undefined ? denied : undefined;
    const cached = cache?.lookup(k);
    if (cached) return Promise.resolve(shadow ? shadowed(cached) : cached);
    const sentAt = cache?.now() ?? 0;
    const fallback = (other: Limiter) =>
      leases ? other.acquire(k, { cost: rawCost }) : other.limit(k, { cost: rawCost });
    let decision = decideBy(clientId(k), list, 'limit', cost, fallback, sent);
    if (cache) {
      decision = decision.then((made) => {
        cache.learn(k, made, sentAt);
        return made;
      });
    }
    return shadow ? decision.then(shadowed) : decision;
  }

  const limit: Limiter['limit'] = (key, limitOptions) => promised(() => consume(key, limitOptions, false));

  const limiter: Limiter = {
    policies,
    policy: policies[0] as Policy,
    prefix,
    limit,
    limitMany: (keys, limitOptions) => limitEach(limit, keys, limitOptions),
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
      await guard.settle((validForMs) =>
        store.run(compiled(policies).script, keys, argsOf(policies, 'reset', 1, 0, 0), validForMs),
      );
    },
    async refund(key, cost = 1, refundOptions) {
      const k = validKey(key);
      const list = policiesFor(callOptions(refundOptions).policy);
      const costs = validAmount('cost', cost, list, false);
      denied?.forget(k);
      return (await guard.settle((validForMs) => run(validForMs, clientId(k), list, 'refund', costs)))[0] === 1;
    },
    async reserve(key, reserveOptions) {
      const sent: Sent = { list: policies, cost: 1 };
      const decision = await consume(key, reserveOptions, false, sent);
      const { list, cost: estimate } = sent;
      // Charged only if the store counted it: not when denied (a shadowed denial included), answered
      // from the denied-key cache, or decided by onStoreError.
      let settled: Promise<boolean> | undefined = sent.reply?.[0] === 1 ? undefined : Promise.resolve(false);
      const settle = (actual: unknown): Promise<boolean> =>
        promised(() => {
          const actualCosts = validAmount('actual', actual, list, true);
          if (settled) return settled.then(() => false);
          const each = (costs: Costs, i: number) => (typeof costs === 'number' ? costs : (costs[i] as number));
          const deltas = list.map((_, i) => each(actualCosts, i) - each(estimate, i));
          denied?.forget(key);
          const settling = deltas.every((d) => d === 0)
            ? Promise.resolve(true)
            : guard.settle((validForMs) => run(validForMs, clientId(key), list, 'settle', deltas)).then(() => true);
          settled = settling.catch((error: unknown) => {
            // Nothing changed (a late call counts nothing): it may be settled again.
            settled = undefined;
            throw error;
          });
          return settled;
        });
      return { ...decision, settle, cancel: () => settle(0) };
    },
    async block(key, duration) {
      const k = validKey(key);
      const ms = parseDuration('duration', duration, 1, InvalidArgumentError);
      denied?.forget(k);
      await guard.settle((validForMs) => run(validForMs, clientId(k), policies, 'block', 1, ms));
    },
    waitFor: (key, waitOptions) => waitThrough(limit, key, waitOptions),
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
        const slots = typeof cost === 'number' ? cost : (cost[i] as number);
        return policy.algorithm === 'concurrency' && id > 0
          ? [{ policy, id, slots, keys: [...keys.slice(0, first), keys[first + i]] as string[] }]
          : [];
      });
      const onEach = async (op: Op, msFor: (policy: Policy) => number) => {
        const replies = await Promise.all(
          held.map(({ policy, id, slots, keys }) =>
            guard.settle((validForMs) =>
              store.run(
                scriptFor([policy.kind]),
                keys,
                scriptArgs({ op, cost: slots, target: id, ms: msFor(policy), penalty, policies: [policy] }),
                validForMs,
              ),
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
