import { bindingPolicy, policyDecision } from '../core/binding.js';
import { parseDuration, type Duration } from '../core/duration.js';
import { CostExceedsLimitError, InvalidArgumentError, InvalidOptionError, WrongMethodError } from '../core/errors.js';
import { callKeys, callSuffixes, clientId, partName, stemmed, validKey, validPrefix } from '../core/keys.js';
import { MAX_TIMER_MS } from '../core/host.js';
import type {
  CostByUnit,
  Decision,
  Lease,
  LimitOptions,
  Limiter,
  Policy,
  PolicyDecision,
  QuotaLeaseOptions,
  Reservation,
  WaitOptions,
} from '../core/types.js';
import { nestedOptions, optionsObject, positiveInteger, type PeerNames } from '../core/validate.js';
import { isEnginePolicy, type EnginePolicy } from '../engine/algorithm.js';
import { compiled, scriptArgs, scriptFor, type Op } from '../engine/driver.js';
import {
  policyAllowed,
  policyLeaseId,
  policyRemaining,
  policyResetAfterMs,
  policyRetryAfterMs,
  replyAllowed,
  replyBlockedForMs,
  replyNowMs,
} from '../engine/reply.js';
import type { Arg, Reply } from '../engine/script.js';
import type { LocalRun, Store } from '../engine/store.js';
import { DeniedCache, type DeniedCacheOptions } from './denied-cache.js';
import { failureGuard, type FailureOptions } from './failure.js';
import { leasedLimiter } from './quota-leasing.js';

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
  /** Quota leases for hot keys: take `units` from the store at once, admit from them here (docs/leases.md). */
  lease?: QuotaLeaseOptions;
}

function isStore(value: unknown): value is Store {
  return typeof value === 'object' && value !== null && typeof (value as Store).run === 'function';
}

function policyList(
  value: unknown,
  Invalid: typeof InvalidOptionError | typeof InvalidArgumentError,
): readonly EnginePolicy[] {
  const list = Array.isArray(value) ? (value as unknown[]) : [value];
  if (list.length === 0 || !list.every(isEnginePolicy)) {
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

/**
 * What refund and settle take: a number for every policy, or a CostByUnit; from 0 when `zero`, else
 * above 0 (a CostByUnit: in at least one unit).
 */
function validAmount(argument: string, amount: unknown, policies: readonly Policy[], zero: boolean): Costs {
  if (typeof amount === 'object' && amount !== null) {
    const costs = costsByUnit(argument, amount, policies);
    if (!zero && costs.every((c) => c === 0))
      throw new InvalidArgumentError(argument, amount, 'a cost above 0 in at least one unit');
    return costs;
  }
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

// A call's options when it has none: one object for all such calls.
const NO_OPTIONS = Object.freeze({});

function callOptions<T extends object>(value: T | undefined): Partial<T> {
  if (value === undefined) return NO_OPTIONS;
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
    // Past the longest a timer waits, it asks again then: one call in 24.8 days, not one a ms.
    await sleep(Math.min(decision.retryAfterMs, MAX_TIMER_MS), signal);
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

/** When a decision charged its units, by the store's clock; undefined if it charged none. */
function chargeOf(decision: unknown): number | undefined {
  if (typeof decision !== 'object' || decision === null || typeof (decision as Decision).allowed !== 'boolean')
    throw new InvalidArgumentError(
      'decision',
      decision,
      'a decision of this limiter: what limit() or reserve() resolved with',
    );
  const { allowed, shadowDenied, reason, decidedAt } = decision as Decision;
  if (decidedAt !== undefined && (!Number.isSafeInteger(decidedAt) || decidedAt < 0))
    throw new InvalidArgumentError(
      'decision.decidedAt',
      decidedAt,
      'a time in ms since the epoch, as the store gave it',
    );
  return allowed && shadowDenied !== true && reason === undefined ? decidedAt : undefined;
}

/** Each policy's numbers, and the decision: the numbers of the binding policy (core/binding.ts). */
export function decisionOf(reply: Reply, policies: readonly Policy[]): Decision {
  // A loop, not map(): no closure per decision, on the memory store's hot path.
  const perPolicy = new Array<PolicyDecision>(policies.length);
  for (let i = 0; i < policies.length; i++) {
    perPolicy[i] = policyDecision(
      policies[i] as Policy,
      policyAllowed(reply, i),
      policyRemaining(reply, i),
      policyResetAfterMs(reply, i),
      policyRetryAfterMs(reply, i),
    );
  }
  const binding = bindingPolicy(perPolicy);
  const allowed = replyAllowed(reply);
  const decision: { -readonly [K in keyof Decision]: Decision[K] } = {
    allowed,
    limit: binding.limit,
    remaining: binding.remaining,
    resetAfterMs: binding.resetAfterMs,
    retryAfterMs: allowed ? 0 : binding.retryAfterMs,
    policies: perPolicy,
    decidedAt: replyNowMs(reply),
  };
  const blockedForMs = replyBlockedForMs(reply);
  if (blockedForMs > 0) decision.blockedForMs = blockedForMs;
  return decision;
}

/** The suffixes of a call's Redis keys and the memory store's names for the same parts. */
function layoutOf(prefix: string, list: readonly EnginePolicy[], withStrikes: boolean) {
  const suffixes = callSuffixes(list, withStrikes);
  return { suffixes, parts: suffixes.map((suffix) => partName(prefix, suffix)) };
}

/**
 * What consume() answers with, from what it decided (the store's reply when the store decided it;
 * undefined when decided without the store: by onStoreError, or from the denied-key cache) and what it asked: the policies and the cost. Separate arguments, not one object: the memory
 * store's hot path allocates nothing but the decision.
 */
type Answerer<T> = (decision: Decision, reply: Reply | undefined, list: readonly EnginePolicy[], cost: Costs) => T;

const decisionConsumed: Answerer<Decision> = (decision) => decision;

const LIMITER_OPTIONS = [
  'store',
  'policy',
  'prefix',
  'shadow',
  'penalty',
  'deniedCache',
  'lease',
  'timeout',
  'onStoreError',
  'onOutage',
  'onRecovery',
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
  // sluice's own names in 0.1.
  hooks:
    'use "onOutage": (failure) => ... and "onRecovery": (recovery) => ..., what hooks.storeError and hooks.recover were',
};

/** Ties policies, a store and a key prefix together. Bad options throw here, not on the first request. */
export function createLimiter(options: LimiterOptions): Limiter {
  if (typeof options === 'object' && options !== null && options.lease !== undefined)
    return leasedLimiter(options, createLimiter);
  const o = optionsObject('createLimiter', options, LIMITER_OPTIONS, LIMITER_PEER_NAMES);
  if (!isStore(o.store)) throw new InvalidOptionError('store', o.store, 'a store: redisStore(client) or memoryStore()');
  const store = o.store;
  const policies = policyList(o.policy, InvalidOptionError);
  const prefix = validPrefix(o.prefix);
  if (o.shadow !== undefined && typeof o.shadow !== 'boolean')
    throw new InvalidOptionError('shadow', o.shadow, 'true or false');
  const shadow = o.shadow === true;
  const guard = failureGuard(o, policies, decisionOf, store.unreachable);
  const denied =
    o.deniedCache === undefined || !policies.every((p) => p.kind.stableDenials === true)
      ? undefined
      : new DeniedCache(o.deniedCache);
  let penalty = { strikes: 0, blockMs: 0 };
  if (o.penalty !== undefined) {
    const p = nestedOptions('penalty', o.penalty, ['after', 'block']);
    penalty = { strikes: positiveInteger('penalty.after', p.after), blockMs: parseDuration('penalty.block', p.block) };
  }

  const withStrikes = penalty.strikes > 0;
  const runLocal = store.runLocal;
  const ownLayout = layoutOf(prefix, policies, withStrikes);
  const layout = (list: readonly EnginePolicy[]) =>
    list === policies ? ownLayout : layoutOf(prefix, list, withStrikes);
  const keysOf = (id: string, list: readonly EnginePolicy[]) => stemmed(prefix, id, layout(list).suffixes);
  // The own policies' script at hand, without compiled()'s lookup on every call.
  const ownScript = compiled(policies).script;
  const scriptOf = (list: readonly EnginePolicy[]) => (list === policies ? ownScript : compiled(list).script);
  // The arguments of the limiter's own calls (limit, peek, refund), built once per op and cost
  // (for the first 64 costs of each): equal calls share one array, which the Redis store then
  // sends once per batch, and which the twin and the Lua read once.
  const ownArgs = new Map<Op, Map<number, readonly string[]>>();
  // The last of them asked for: most calls repeat it (a limit of cost 1), and skip the maps.
  let last: { readonly op: Op; readonly cost: number; readonly args: readonly string[] } | undefined;

  function argsOf(list: readonly EnginePolicy[], op: Op, cost: Costs, target: number, ms: number): readonly Arg[] {
    if (typeof cost !== 'number') return scriptArgs({ op, cost, target, ms, penalty, policies: list });
    const own = list === policies && target === 0 && ms === 0;
    if (own && last !== undefined && last.op === op && last.cost === cost) return last.args;
    const known = own ? ownArgs.get(op)?.get(cost) : undefined;
    if (known !== undefined) {
      last = { op, cost, args: known };
      return known;
    }
    const args = scriptArgs({ op, cost, target, ms, penalty, policies: list });
    if (!own) return args;
    let byCost = ownArgs.get(op);
    if (byCost === undefined) ownArgs.set(op, (byCost = new Map<number, readonly string[]>()));
    const shared = args.map(String);
    if (byCost.size < 64) byCost.set(cost, shared);
    return shared;
  }

  /** One guarded store call: it counts nothing if it reaches the store after `deadline`. */
  function run(
    deadline: number,
    id: string,
    list: readonly EnginePolicy[],
    op: Op,
    cost: Costs = 1,
    target = 0,
    ms = 0,
  ): Promise<Reply> {
    return store.run(scriptOf(list), keysOf(id, list), argsOf(list, op, cost, target, ms), deadline);
  }

  /** A store call with no decision to fall back on: within the timeout, or a StoreError. */
  function change(id: string, list: readonly EnginePolicy[], op: Op, cost: Costs, target = 0, ms = 0) {
    return guard.settle(op, (deadline) => run(deadline, id, list, op, cost, target, ms));
  }

  /** A limit or peek on a local store, which answers at once and cannot fail: its reply. */
  function localReply(runLocal: LocalRun, id: string, list: readonly EnginePolicy[], op: Op, cost: Costs): Reply {
    return runLocal(id, layout(list).parts, scriptOf(list), argsOf(list, op, cost, 0, 0));
  }

  /**
   * A limit or peek on a store that is not local, mapped by `answer`: asked through the failure
   * guard, and `fallback` decides when it fails.
   */
  function decide<T>(
    id: string,
    list: readonly EnginePolicy[],
    op: 'limit' | 'peek',
    cost: Costs,
    fallback: (limiter: Limiter) => Promise<Decision>,
    answer: (decision: Decision, reply?: Reply) => T,
  ): Promise<T> {
    return guard.decide(op, list, (deadline) => run(deadline, id, list, op, cost), answer, fallback);
  }

  function policiesFor(value: unknown): readonly EnginePolicy[] {
    return value === undefined ? policies : policyList(value, InvalidArgumentError);
  }

  const leasing = (list: readonly EnginePolicy[]) => list.some((p) => p.kind.leases === true);
  const ownLeases = leasing(policies);
  const shadowed = (decision: Decision): Decision => ({
    ...decision,
    allowed: true,
    retryAfterMs: 0,
    shadow: true,
    shadowDenied: !decision.allowed,
  });

  /**
   * Decides and counts one request; resolves with what `answer` makes of the decision, what was
   * asked and how the store replied. Throws on bad input.
   */
  function consume<T>(
    key: string,
    options: LimitOptions | undefined,
    leases: boolean,
    answer: Answerer<T>,
  ): Promise<T> {
    const k = validKey(key);
    const { cost: rawCost, policy } = callOptions(options);
    const list = policiesFor(policy);
    const cost = validCost(rawCost, list);
    if (leases !== (list === policies ? ownLeases : leasing(list))) {
      throw new WrongMethodError(
        leases
          ? 'acquire() needs a concurrency policy'
          : 'a concurrency policy takes slots with acquire(), which returns a lease to release',
      );
    }
    // Only the limiter's own policies, at cost 1, go through the denied-key cache.
    const cache = denied && cost === 1 && policy === undefined ? denied : undefined;
    const cached = cache?.lookup(k);
    if (cached) return Promise.resolve(answer(shadow ? shadowed(cached) : cached, undefined, list, cost));
    const sentAt = cache?.now() ?? 0;
    // A local store's decision is answered here, without the closures the guarded path needs (in
    // a function of its own: closures here would cost a context per call on this path too).
    if (runLocal) {
      const reply = localReply(runLocal, clientId(k), list, 'limit', cost);
      return Promise.resolve(learned(k, cache, sentAt, decisionOf(reply, list), reply, list, cost, answer));
    }
    return consumeGuarded(k, rawCost, leases, cache, sentAt, list, cost, answer);
  }

  /** consume() on a store that is not local: through the failure guard. */
  function consumeGuarded<T>(
    key: string,
    rawCost: LimitOptions['cost'],
    leases: boolean,
    cache: DeniedCache | undefined,
    sentAt: number,
    list: readonly EnginePolicy[],
    cost: Costs,
    answer: Answerer<T>,
  ): Promise<T> {
    const fallback = (other: Limiter) =>
      leases ? other.acquire(key, { cost: rawCost }) : other.limit(key, { cost: rawCost });
    return decide(clientId(key), list, 'limit', cost, fallback, (decision, reply) =>
      learned(key, cache, sentAt, decision, reply, list, cost, answer),
    );
  }

  /** consume()'s answer to a decision it did not find in the denied-key cache, which learns it. */
  function learned<T>(
    key: string,
    cache: DeniedCache | undefined,
    sentAt: number,
    decision: Decision,
    reply: Reply | undefined,
    list: readonly EnginePolicy[],
    cost: Costs,
    answer: Answerer<T>,
  ): T {
    cache?.learn(key, decision, sentAt);
    return answer(shadow ? shadowed(decision) : decision, reply, list, cost);
  }

  /** settle() of a reservation: corrects the charge from `estimate` to what is `actual`, once. */
  function settler(
    key: string,
    reply: Reply | undefined,
    list: readonly EnginePolicy[],
    estimate: Costs,
  ): (actual: unknown) => Promise<boolean> {
    // Charged only if the store counted it: not when denied (a shadowed denial included), answered
    // from the denied-key cache, or decided by onStoreError.
    let settled: Promise<boolean> | undefined =
      reply !== undefined && replyAllowed(reply) ? undefined : Promise.resolve(false);
    // Read now: a local store reuses its reply for its next call.
    const chargedAt = reply === undefined ? 0 : replyNowMs(reply);
    const each = (costs: Costs, i: number) => (typeof costs === 'number' ? costs : (costs[i] as number));
    return (actual) =>
      promised(() => {
        const actualCosts = validAmount('actual', actual, list, true);
        if (settled) return settled.then(() => false);
        const deltas = list.map((_, i) => each(actualCosts, i) - each(estimate, i));
        denied?.forget(key);
        // Given back where the estimate was charged, at the reply's time (the store's clock).
        const settling = deltas.every((d) => d === 0)
          ? Promise.resolve(true)
          : change(clientId(key), list, 'settle', deltas, chargedAt).then(() => true);
        settled = settling.catch((error: unknown) => {
          // Nothing changed (a late call counts nothing): it may be settled again.
          settled = undefined;
          throw error;
        });
        return settled;
      });
  }

  /** A lease's release() and extend(): on each concurrency policy that gave a slot. */
  function leaseOf(
    key: string,
    decision: Decision,
    reply: Reply | undefined,
    list: readonly EnginePolicy[],
    cost: Costs,
  ): Lease {
    // Without the store's reply, the decision came from onStoreError: a fallback limiter's lease
    // is its own to release, and 'allow' or 'deny' took no slot.
    if (reply === undefined && 'release' in decision) return decision as Lease;
    const keys = keysOf(clientId(key), list);
    const first = withStrikes ? 2 : 1;
    const held = list.flatMap((policy, i) => {
      const leaseId = reply === undefined ? 0 : policyLeaseId(reply, i);
      const slots = typeof cost === 'number' ? cost : (cost[i] as number);
      return policy.kind.leases === true && leaseId > 0
        ? [{ policy, leaseId, slots, keys: [...keys.slice(0, first), keys[first + i] as string] }]
        : [];
    });
    const onEach = async (op: Op, msFor: (policy: Policy) => number) => {
      const replies = await Promise.all(
        held.map(({ policy, leaseId, slots, keys }) =>
          guard.settle(op, (deadline) =>
            store.run(
              scriptFor([policy.kind]),
              keys,
              scriptArgs({ op, cost: slots, target: leaseId, ms: msFor(policy), penalty, policies: [policy] }),
              deadline,
            ),
          ),
        ),
      );
      return replies.some(replyAllowed);
    };
    return {
      ...decision,
      release: () => onEach('release', () => 0),
      async extend(ms?: Duration) {
        const extendMs = ms === undefined ? undefined : parseDuration('ms', ms, 1, InvalidArgumentError);
        return onEach('extend', (policy) => extendMs ?? policy.windowMs);
      },
    };
  }

  // Not through promised(): no closure per call. Bad input rejects, as the API promises.
  const limit: Limiter['limit'] = (key, limitOptions) => {
    try {
      return consume(key, limitOptions, false, decisionConsumed);
    } catch (error) {
      return Promise.reject(error);
    }
  };

  const limiter: Limiter = {
    policies,
    policy: policies[0] as Policy,
    prefix,
    watchStore: (watcher) => guard.watch(watcher),
    limit,
    limitMany: (keys, limitOptions) => limitEach(limit, keys, limitOptions),
    async peek(key, peekOptions) {
      const k = validKey(key);
      const list = policiesFor(callOptions(peekOptions).policy);
      if (runLocal) return decisionOf(localReply(runLocal, clientId(k), list, 'peek', 1), list);
      return decide(
        clientId(k),
        list,
        'peek',
        1,
        (fallback) => fallback.peek(k),
        (decision) => decision,
      );
    },
    async reset(key) {
      const k = validKey(key);
      denied?.forget(k);
      // Every key of the client, the strikes key included even without a penalty box: an earlier
      // configuration with one may have left strikes.
      const keys = callKeys(prefix, k, policies, true);
      await guard.settle('reset', (deadline) =>
        store.run(ownScript, keys, argsOf(policies, 'reset', 1, 0, 0), deadline),
      );
    },
    async refund(key, cost = 1, refundOptions) {
      const k = validKey(key);
      const { policy, decision } = callOptions(refundOptions);
      const list = policiesFor(policy);
      const costs = validAmount('cost', cost, list, false);
      const chargedAt = decision === undefined ? 0 : chargeOf(decision);
      if (chargedAt === undefined) return false;
      denied?.forget(k);
      return replyAllowed(await change(clientId(k), list, 'refund', costs, chargedAt));
    },
    async reserve(key, reserveOptions) {
      return consume(key, reserveOptions, false, (decision, reply, list, cost): Reservation => {
        const settle = settler(key, reply, list, cost);
        return { ...decision, settle, cancel: () => settle(0) };
      });
    },
    async block(key, duration) {
      const k = validKey(key);
      const ms = parseDuration('duration', duration, 1, InvalidArgumentError);
      denied?.forget(k);
      await change(clientId(k), policies, 'block', 1, ms);
    },
    waitFor: (key, waitOptions) => waitThrough(limit, key, waitOptions),
    async acquire(key, acquireOptions) {
      return consume(key, acquireOptions, true, (decision, reply, list, cost) =>
        leaseOf(key, decision, reply, list, cost),
      );
    },
    close: () => Promise.resolve(),
    storageKeys(key) {
      const [block = '', strikes = '', ...parts] = callKeys(prefix, validKey(key), policies, true);
      return { block, strikes, policies: parts };
    },
  };
  return limiter;
}
