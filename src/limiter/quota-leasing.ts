import { parseDuration } from '../core/duration.js';
import { InvalidOptionError, WrongMethodError } from '../core/errors.js';
import { holdProcessOpen } from '../core/host.js';
import { validKey } from '../core/keys.js';
import type { Decision, Limiter, LimitOptions, QuotaLeaseWatcher, Reservation } from '../core/types.js';
import { nestedOptions, positiveInteger } from '../core/validate.js';
import { enginePolicy } from '../engine/algorithm.js';
import { limitEach, waitThrough } from './built-on-limit.js';
import { shadowed } from './decision.js';
import { storeErrorPolicy } from './failure-options.js';
import type { LimiterOptions } from './options.js';
import { leaseTerms, QuotaLease, type LeaseTerms } from './quota-lease.js';

/** One key's leasing in this process: its lease, the store's last word on its room, a take under way. */
interface KeyLeasing {
  lease: QuotaLease | undefined;
  /** The units the store last said it had room for, and when (this process's clock). */
  room: number;
  roomAt: number;
  /** A window's: when the window of that word has surely ended, and all its room is back. */
  roomUntil: number;
  /** Whether that word was a denial. */
  denied: boolean;
  /**
   * The take under way: resolves with its denial or a decision made without the store (and the
   * request's cost), or undefined once the store admitted.
   */
  taking: Promise<{ decision: Decision; cost: number } | undefined> | undefined;
}

/** The most keys whose store's last word a limiter remembers (beyond those holding a lease). */
const MAX_KEYS = 10_000;

const BLOCK_REFUSED =
  "block() on a limiter with a lease: other processes admit from the leases they hold until those end, so a block could not take effect at once; block keys with a limiter without `lease` (it shares this one's keys when it has the same prefix and policy)";

/** What a take answers: the store's decision, and the units it took (0 when denied or decided without the store). */
export interface Taken {
  readonly decision: Decision;
  readonly taken: number;
}

/** The limiter that asks the store, and its take: `most` units, or as many as fit down to `least`, in one step. */
export interface StoreLimiter {
  readonly limiter: Limiter;
  readonly takeUpTo: (key: string, most: number, least: number) => Promise<Taken>;
}

/**
 * A limiter whose limit() takes quota from the store `lease.units` at a time and admits from it
 * here (docs/leases.md). `create` makes the limiter that asks the store: createLimiter without the
 * lease, shadow mode (applied here, to what the leases decide too) and a fallback limiter (asked
 * here, at the request's own cost rather than the lease's).
 */
export function leasedLimiter(options: LimiterOptions, create: (options: LimiterOptions) => StoreLimiter): Limiter {
  const { lease, shadow, onStoreError, ...rest } = options;
  const l = nestedOptions('lease', lease, ['units', 'ms']);
  if (shadow !== undefined && typeof shadow !== 'boolean')
    throw new InvalidOptionError('shadow', shadow, 'true or false');
  if (rest.penalty !== undefined)
    throw new InvalidOptionError(
      'penalty',
      rest.penalty,
      'left out on a limiter with a lease: leases admit without the store, so denials would not be in a row and a block would not stop them at once',
    );
  const fallback = typeof onStoreError === 'object' ? onStoreError : undefined;
  const asked = create({ ...rest, onStoreError: fallback === undefined ? onStoreError : 'deny' });
  const store = asked.limiter;
  if (store.policies.length !== 1)
    throw new InvalidOptionError(
      'lease',
      lease,
      'a lease on a limiter of one policy: a lease takes one quota ahead, and several policies would each need their own',
    );
  const policy = enginePolicy(store.policy);
  if (fallback !== undefined) storeErrorPolicy(fallback, [policy]);
  const units = positiveInteger('lease.units', l.units, policy.maxCost);
  const terms = leaseTerms(policy, parseDuration('lease.ms', l.ms), lease);
  return leasing(store, { units, terms, shadow: shadow === true, fallback, takeUpTo: asked.takeUpTo });
}

interface Leasing {
  readonly takeUpTo: StoreLimiter['takeUpTo'];
  readonly units: number;
  readonly terms: LeaseTerms;
  readonly shadow: boolean;
  readonly fallback: Limiter | undefined;
}

/**
 * A leased limiter's state (each key's leasing, the watchers, the leases' refunds under way, whether
 * close() ran) and its steps: how a key's lease is taken, used and ended.
 */
class QuotaLeasing {
  readonly keys = new Map<string, KeyLeasing>();
  readonly watchers: QuotaLeaseWatcher[] = [];
  private readonly returning = new Set<Promise<void>>();
  private closed = false;

  /** `store`: the limiter that asks the store. */
  constructor(
    private readonly store: Limiter,
    private readonly leasing: Leasing,
  ) {}

  private tell(event: keyof QuotaLeaseWatcher, count: number): void {
    if (count > 0) for (const watcher of this.watchers) watcher[event]?.(count);
  }

  readonly shade = <T extends Decision>(decision: T): T => (this.leasing.shadow ? shadowed(decision) : decision);

  /** A key's leasing, new: the keys past MAX_KEYS that hold no lease and wait for none are forgotten, oldest first. */
  private remember(key: string): KeyLeasing {
    for (const [old, state] of this.keys) {
      if (this.keys.size < MAX_KEYS) break;
      if (state.lease === undefined && state.taking === undefined) this.keys.delete(old);
    }
    const { units } = this.leasing;
    const state = { lease: undefined, room: units, roomAt: 0, roomUntil: 0, denied: false, taking: undefined };
    this.keys.set(key, state);
    return state;
  }

  /** Ends `lease` of `key`: gives back its unused units, where it charged them. */
  private end(key: string, lease: QuotaLease): void {
    const state = this.keys.get(key);
    if (state?.lease === lease) state.lease = undefined;
    clearTimeout(lease.timer);
    this.tell('onExpired', lease.skipped);
    const unused = lease.unused;
    if (unused === 0) return;
    const giving: Promise<void> = this.store.refund(key, unused, { decision: lease.decision }).then(
      (given) => this.tell(given ? 'onReturned' : 'onExpired', unused),
      // The units stay spent: a store that fails costs room, never an admission too many.
      () => this.tell('onExpired', unused),
    );
    this.returning.add(giving);
    void giving.finally(() => this.returning.delete(giving));
  }

  /** The units the store has room for at `now`, as far as its last word tells. */
  private room(state: KeyLeasing, now: number): number {
    const { terms, units } = this.leasing;
    // A bucket that denied is shared by every process its refill goes to: asked at the request's
    // cost until the store admits again and says how much room it has.
    if (terms.slotMs > 0) return state.denied ? 0 : state.room + Math.floor((now - state.roomAt) / terms.slotMs);
    return now >= state.roomUntil ? units : state.room;
  }

  /** Remembers the store's word on the key's room, told at `sentAt`. */
  private heard(state: KeyLeasing, decision: Decision, sentAt: number): void {
    const { terms } = this.leasing;
    const now = performance.now();
    state.room = decision.remaining;
    state.roomAt = sentAt;
    state.denied = !decision.allowed;
    // By then the window of the decision has surely ended.
    state.roomUntil = now + terms.windowMs - ((decision.decidedAt ?? 0) % (terms.windowMs || 1));
  }

  /** A decision made without the store: a fallback limiter's, asked at the request's own cost, or the guard's. */
  private async failedOver(key: string, cost: number, decision: Decision): Promise<Decision> {
    const { fallback } = this.leasing;
    if (fallback === undefined) return decision;
    // As the failure guard marks a fallback's decision: decided without the store, and why.
    const { reason, error } = decision;
    return { ...(await fallback.limit(key, { cost })), reason, error };
  }

  /** Asks the store for the request alone, as a limiter without a lease does. */
  private async direct(key: string, cost: number, state: KeyLeasing): Promise<Decision> {
    const sentAt = performance.now();
    const decision = await this.store.limit(key, { cost });
    if (decision.reason !== undefined) return this.failedOver(key, cost, decision);
    this.heard(state, decision, sentAt);
    return decision;
  }

  /**
   * Asks the store for a lease of up to `units`, of which the request's `cost` are used at once: one
   * step, which takes what fits down to `cost` (so a call waits for one store call, within its timeout).
   */
  private async take(key: string, cost: number, state: KeyLeasing): Promise<Decision> {
    const { units, terms, takeUpTo } = this.leasing;
    const ask = Math.max(cost, Math.min(units, this.room(state, performance.now())));
    if (ask === cost) return this.direct(key, cost, state);
    const sentAt = performance.now();
    const { decision, taken } = await takeUpTo(key, ask, cost);
    if (decision.reason !== undefined) return this.failedOver(key, cost, decision);
    this.heard(state, decision, sentAt);
    // A denial (blocked, or no room for the request's own cost) is the store's answer to the request.
    if (!decision.allowed || taken === cost) return decision;
    const lease = new QuotaLease(decision, taken, cost, sentAt, this.store.policy, terms);
    if (state.lease !== undefined) this.end(key, state.lease);
    state.lease = lease;
    this.tell('onTaken', taken);
    const answer = lease.answer(performance.now());
    // Taken as close() ran: what the request did not use goes back at once.
    if (this.closed) this.end(key, lease);
    else {
      lease.timer = setTimeout(() => this.end(key, lease), Math.max(0, lease.endsAt - performance.now()));
      holdProcessOpen(lease.timer, false);
    }
    return answer;
  }

  /** A request that the lease could not admit: it waits for a take under way, or takes a lease itself. */
  private async dry(key: string, cost: number): Promise<Decision> {
    for (;;) {
      const held = this.keys.get(key)?.lease;
      if (held !== undefined) {
        const admitted = held.take(cost, performance.now());
        if (admitted !== undefined) return admitted;
        if (held.available(performance.now()) === 0) this.end(key, held);
      }
      let state = this.keys.get(key);
      if (state === undefined) state = this.remember(key);
      if (state.taking !== undefined) {
        // A request that arrived while the store was asked uses the lease it took, or shares its
        // denial at the same cost, or, when the store failed or was late, the failure policy's
        // answer (asking again could take it past its timeout); else the store had no lease to give,
        // and is asked for the request alone, with the others that waited (in one batch).
        const taken = await state.taking;
        // The lease that take took is used; the one held before (too small for this cost) is not asked again.
        if (state.lease !== undefined && state.lease !== held) continue;
        if (taken?.decision.reason !== undefined) return this.failedOver(key, cost, taken.decision);
        if (taken !== undefined && taken.cost === cost) return taken.decision;
        return this.direct(key, cost, state);
      }
      const own = state;
      const taking = this.take(key, cost, own);
      const waiting = taking.then(
        (decision) => (decision.allowed && decision.reason === undefined ? undefined : { decision, cost }),
        () => undefined,
      );
      own.taking = waiting;
      void waiting.then(() => (own.taking = undefined));
      return taking;
    }
  }

  readonly limit: Limiter['limit'] = (key: string, limitOptions?: LimitOptions) => {
    const cost = typeof limitOptions === 'object' && limitOptions !== null ? (limitOptions.cost ?? 1) : 1;
    // Another policy, a cost by unit or past the lease, a bad argument, or after close(): the store's, as without a lease.
    if (
      this.closed ||
      limitOptions?.policy !== undefined ||
      typeof cost !== 'number' ||
      !Number.isInteger(cost) ||
      cost < 1 ||
      cost > this.leasing.units
    )
      return this.store.limit(key, limitOptions).then(this.shade);
    try {
      validKey(key);
    } catch (error) {
      return Promise.reject(error);
    }
    const admitted = this.keys.get(key)?.lease?.take(cost, performance.now());
    return admitted !== undefined ? Promise.resolve(this.shade(admitted)) : this.dry(key, cost).then(this.shade);
  };

  /** The units `key`'s lease holds now. */
  held(key: string): number {
    return this.keys.get(key)?.lease?.available(performance.now()) ?? 0;
  }

  async reset(key: string): Promise<void> {
    // The store forgets the key: what the lease held is no more charged anywhere.
    const lease = this.keys.get(validKey(key))?.lease;
    if (lease !== undefined) {
      clearTimeout(lease.timer);
      this.keys.delete(key);
    }
    await this.store.reset(key);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const [key, state] of this.keys) if (state.lease !== undefined) this.end(key, state.lease);
    await Promise.all(this.returning);
  }
}

/** The leased limiter over `store`, the limiter that asks the store. */
function leasing(store: Limiter, options: Leasing): Limiter {
  const leases = new QuotaLeasing(store, options);
  const { limit, shade } = leases;
  return {
    ...store,
    // Not the store's: every decision goes through the leases, none at once without them.
    limitNow: undefined,
    limit,
    limitMany: (keyList, limitOptions) => limitEach(limit, keyList, limitOptions),
    waitFor: (key, waitOptions) => waitThrough(limit, key, waitOptions),
    async peek(key, peekOptions) {
      const decision = await store.peek(key, peekOptions);
      const held = peekOptions?.policy === undefined ? leases.held(key) : 0;
      if (held === 0) return decision;
      const remaining = decision.remaining + held;
      const [part] = decision.policies;
      return {
        ...decision,
        allowed: true,
        remaining,
        retryAfterMs: 0,
        policies: part ? [{ ...part, allowed: true, remaining, retryAfterMs: 0 }] : [],
      };
    },
    async reserve(key, reserveOptions): Promise<Reservation> {
      return shade(await store.reserve(key, reserveOptions));
    },
    reset: (key) => leases.reset(key),
    block: () => Promise.reject(new WrongMethodError(BLOCK_REFUSED)),
    watchLeases: (watcher) => void leases.watchers.push(watcher),
    close: () => leases.close(),
  };
}
