import { parseDuration } from '../core/duration.js';
import { InvalidArgumentError, WrongMethodError } from '../core/errors.js';
import { callKeys, clientId, validKey } from '../core/keys.js';
import type { Duration } from '../core/duration.js';
import type { Decision, LimitOptions, Limiter, Policy, RefundOptions } from '../core/types.js';
import type { EnginePolicy } from '../engine/algorithm.js';
import { policyUnitsTaken, replyAllowed } from '../engine/reply.js';
import type { Reply } from '../engine/script.js';
import { limitEach, waitThrough } from './built-on-limit.js';
import { callOptions, chargeOf, validAmount, validCost, type Costs } from './call-arguments.js';
import { leaseOf, leasing } from './concurrency.js';
import { decisionOf, shadowed } from './decision.js';
import type { DeniedCache } from './denied-cache.js';
import { limiterParts, policyList, type LimiterOptions, type LimiterParts } from './options.js';
import { reservationOf } from './reservations.js';
import { leasedLimiter, type Taken } from './quota-leasing.js';

export type { LimiterOptions } from './options.js';

/**
 * What consume() answers with, from what it decided (the store's reply when the store decided it;
 * undefined when decided without the store: by onStoreError, or from the denied-key cache) and what
 * it asked: the policies and the cost. Separate arguments, not one object: the memory store's hot
 * path allocates nothing but the decision.
 */
type Answerer<T> = (decision: Decision, reply: Reply | undefined, list: readonly EnginePolicy[], cost: Costs) => T;

const asDecided = (decision: Decision): Decision => decision;

function policiesFor(own: LimiterParts, value: unknown): readonly EnginePolicy[] {
  return value === undefined ? own.policies : policyList(value, InvalidArgumentError);
}

/**
 * Decides and counts one request: what `answer` makes of the decision, what was asked and how the
 * store replied; at once when nothing is asked of a remote store (a local store's decision, the
 * denied-key cache's), else a promise of it. Throws on bad input.
 */
function consume<T>(
  own: LimiterParts,
  key: string,
  options: LimitOptions | undefined,
  leases: boolean,
  answer: Answerer<T>,
): T | Promise<T> {
  const k = validKey(key);
  const { cost: rawCost, policy } = callOptions(options);
  const list = policiesFor(own, policy);
  const cost = validCost(rawCost, list);
  if (leases !== (list === own.policies ? own.ownLeases : leasing(list))) {
    throw new WrongMethodError(
      leases
        ? 'acquire() needs a concurrency policy'
        : 'a concurrency policy takes slots with acquire(), which returns a lease to release',
    );
  }
  // Only the limiter's own policies, at cost 1, go through the denied-key cache.
  const { denied, calls } = own;
  const cache = denied && cost === 1 && policy === undefined ? denied : undefined;
  const cached = cache?.lookup(k);
  if (cached) return answer(own.shadow ? shadowed(cached) : cached, undefined, list, cost);
  const sentAt = cache?.now() ?? 0;
  // A local store's decision is answered here, without the closures the guarded path needs.
  if (calls.runLocal) {
    const reply = calls.localReply(clientId(k), list, 'limit', cost);
    return learned(own, k, cache, sentAt, decisionOf(reply, list), reply, list, cost, answer);
  }
  return calls.decide(
    leases ? 'acquire' : 'limit',
    clientId(k),
    list,
    cost,
    (decision, reply) => learned(own, k, cache, sentAt, decision, reply, list, cost, answer),
    k,
    rawCost,
  );
}

/** consume()'s answer to a decision it did not find in the denied-key cache, which learns it. */
function learned<T>(
  own: LimiterParts,
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
  return answer(own.shadow ? shadowed(decision) : decision, reply, list, cost);
}

function peek(
  own: LimiterParts,
  key: string,
  peekOptions: Pick<LimitOptions, 'policy'> | undefined,
): Promise<Decision> {
  const k = validKey(key);
  const list = policiesFor(own, callOptions(peekOptions).policy);
  const { calls } = own;
  if (calls.runLocal) return Promise.resolve(decisionOf(calls.localReply(clientId(k), list, 'peek', 1), list));
  return calls.decide('peek', clientId(k), list, 1, asDecided, k, undefined);
}

async function reset(own: LimiterParts, key: string): Promise<void> {
  const k = validKey(key);
  own.denied?.forget(k);
  // Every key of the client, the strikes key included even without a penalty box: an earlier
  // configuration with one may have left strikes.
  await own.calls.reset(callKeys(own.prefix, k, own.policies, true));
}

async function refund(
  own: LimiterParts,
  key: string,
  cost: unknown,
  refundOptions: RefundOptions | undefined,
): Promise<boolean> {
  const k = validKey(key);
  const { policy, decision } = callOptions(refundOptions);
  const list = policiesFor(own, policy);
  const costs = validAmount('cost', cost, list, false);
  const chargedAt = decision === undefined ? 0 : chargeOf(decision);
  if (chargedAt === undefined) return false;
  own.denied?.forget(k);
  return replyAllowed(await own.calls.change(clientId(k), list, 'refund', costs, chargedAt));
}

async function block(own: LimiterParts, key: string, duration: Duration): Promise<void> {
  const k = validKey(key);
  const ms = parseDuration('duration', duration, 1, InvalidArgumentError);
  own.denied?.forget(k);
  await own.calls.change(clientId(k), own.policies, 'block', 1, ms);
}

/**
 * A quota lease's take: `most` units of the limiter's one policy or, when they do not fit, as many
 * as fit down to `least` (the request's cost), in one step; the store's decision and the units taken.
 */
function takeUpTo(own: LimiterParts, key: string, most: number, least: number): Promise<Taken> {
  const k = validKey(key);
  const { calls, policies } = own;
  const answer = (decision: Decision, reply: Reply | undefined): Taken => ({
    decision,
    taken: reply === undefined || !decision.allowed ? 0 : policyUnitsTaken(reply, 0),
  });
  if (calls.runLocal) {
    const reply = calls.localReply(clientId(k), policies, 'take', most, least);
    return Promise.resolve(answer(decisionOf(reply, policies), reply));
  }
  return calls.decide('limit', clientId(k), policies, most, answer, k, least, { least });
}

/** Ties policies, a store and a key prefix together. Bad options throw here, not on the first request. */
export function createLimiter(options: LimiterOptions): Limiter {
  if (typeof options === 'object' && options !== null && options.lease !== undefined)
    return leasedLimiter(options, (storeOptions) => {
      const own = limiterParts(storeOptions);
      return { limiter: limiterOf(own), takeUpTo: (key, most, least) => takeUpTo(own, key, most, least) };
    });
  return limiterOf(limiterParts(options));
}

/** The limiter of `own`'s parts. */
function limiterOf(own: LimiterParts): Limiter {
  const { policies, prefix, calls, denied } = own;
  // Not through promised(): no closure per call. Bad input rejects, as the API promises.
  const limit: Limiter['limit'] = (key, limitOptions) => {
    try {
      return Promise.resolve(consume(own, key, limitOptions, false, asDecided));
    } catch (error) {
      return Promise.reject(error);
    }
  };
  // A local store's decision is there at once (consume answers it without a promise).
  const limitNow: Limiter['limitNow'] = calls.runLocal
    ? (key, limitOptions) => consume(own, key, limitOptions, false, asDecided) as Decision
    : undefined;
  return {
    policies,
    policy: policies[0] as Policy,
    prefix,
    watchStore: (watcher) => calls.guard.watch(watcher),
    limit,
    ...(limitNow && { limitNow }),
    limitMany: (keys, limitOptions) => limitEach(limit, keys, limitOptions),
    peek: async (key, peekOptions) => peek(own, key, peekOptions),
    reset: async (key) => reset(own, key),
    refund: async (key, cost = 1, refundOptions) => refund(own, key, cost, refundOptions),
    async reserve(key, reserveOptions) {
      return consume(own, key, reserveOptions, false, (decision, reply, list, cost) =>
        reservationOf(calls, denied, key, decision, reply, list, cost),
      );
    },
    block: async (key, duration) => block(own, key, duration),
    waitFor: (key, waitOptions) => waitThrough(limit, key, waitOptions),
    async acquire(key, acquireOptions) {
      return consume(own, key, acquireOptions, true, (decision, reply, list, cost) =>
        leaseOf(calls, key, decision, reply, list, cost),
      );
    },
    close: () => Promise.resolve(),
    storageKeys(key) {
      const [block = '', strikes = '', ...parts] = callKeys(prefix, validKey(key), policies, true);
      return { block, strikes, policies: parts };
    },
  };
}
