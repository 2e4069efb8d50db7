import { policyDecision } from '../core/binding.js';
import { InvalidOptionError } from '../core/errors.js';
import type { Decision, Policy } from '../core/types.js';
import type { EnginePolicy } from '../engine/algorithm.js';

/**
 * How long a policy's leased units stay usable (docs/leases.md, "Why it never over-admits"): a
 * window's units only in the window that counted them, a bucket's each only until its place in the
 * bucket's schedule has passed.
 */
export interface LeaseTerms {
  /** The longest a lease is used, in ms. */
  readonly ms: number;
  /** Window algorithms: the window (ms), which no lease outlives; 0 for a bucket. */
  readonly windowMs: number;
  /** Buckets (tokenBucket, gcra): the ms one unit takes to refill, exactly as the store counts it; 0 for a window. */
  readonly slotMs: number;
}

const REFUSED: Readonly<Record<string, string>> = {
  'sliding-log':
    'a policy other than slidingLog: the log counts each unit for one window from the ms it was charged, so a leased unit used later would leave the log before the request it admitted leaves the window, and the limit could be passed (slidingWindow takes a lease)',
  concurrency:
    'a policy other than concurrency: a slot is held until released, and acquire() already takes it in one step; there is no quota to take ahead',
};

/** The terms of leases of `policy`, or an InvalidOptionError naming why it takes none. */
export function leaseTerms(policy: EnginePolicy, ms: number, lease: unknown): LeaseTerms {
  switch (policy.algorithm) {
    case 'fixed-window':
    case 'sliding-window':
      return { ms, windowMs: policy.windowMs, slotMs: 0 };
    case 'token-bucket':
    case 'gcra': {
      // The parameters of fresh-at.ts: a unit's step and the units per ms.
      const [step = 1, , perMs = 1] = policy.params;
      return { ms, windowMs: 0, slotMs: step / perMs };
    }
    default:
      throw new InvalidOptionError(
        'lease',
        lease,
        REFUSED[policy.algorithm] ?? `a policy that takes leases, not ${policy.algorithm}`,
      );
  }
}

/**
 * Units taken from the store in one step, used here one request at a time. The store counted all
 * of them at once, so what is used from it never admits more than the store would have. Times are
 * this process's (performance.now()), measured from before the store was asked: never later than
 * the store's own.
 */
export class QuotaLease {
  /** The lease's next unit: those before it were used, or (a bucket) skipped as their time passed. */
  private next: number;
  private used: number;
  /** When the lease is over, by this process's clock. */
  readonly endsAt: number;
  /** A bucket: when the first unit's place in the schedule passes; unit k's passes k slots later. */
  private readonly validFrom: number;
  /** The timer that ends the lease, if one was set. */
  timer: ReturnType<typeof setTimeout> | undefined;

  /**
   * `decision`: the store's, which admitted `units` at `sentAt`, the first `cost` of them for the
   * request that asked.
   */
  constructor(
    readonly decision: Decision,
    readonly units: number,
    cost: number,
    private readonly sentAt: number,
    private readonly policy: Policy,
    private readonly terms: LeaseTerms,
  ) {
    this.next = cost;
    this.used = cost;
    const { windowMs, slotMs, ms } = terms;
    const decidedAt = decision.decidedAt ?? 0;
    // decidedAt is the store's time rounded down to the ms: the window may have up to 1 ms less left.
    this.endsAt = sentAt + (windowMs > 0 ? Math.min(ms, Math.max(0, windowMs - (decidedAt % windowMs) - 1)) : ms);
    // After the take the bucket is fresh in resetAfterMs (rounded up to the ms), so its units' places
    // start at least units slots before that, less the ms of rounding; never before the take.
    this.validFrom = sentAt + Math.max(0, decision.resetAfterMs - 1 - units * slotMs);
  }

  /** The units left that a request at `now` could use. */
  available(now: number): number {
    return now >= this.endsAt ? 0 : this.units - this.first(now);
  }

  /** The first unit still usable at `now`. */
  private first(now: number): number {
    const { slotMs } = this.terms;
    if (slotMs === 0 || now <= this.validFrom) return this.next;
    return Math.max(this.next, Math.ceil((now - this.validFrom) / slotMs));
  }

  /** Uses `cost` units at `now`: the decision that admits them, or undefined when the lease cannot. */
  take(cost: number, now: number): Decision | undefined {
    if (now >= this.endsAt) return undefined;
    const first = this.first(now);
    if (first + cost > this.units) return undefined;
    this.next = first + cost;
    this.used += cost;
    return this.answer(now);
  }

  /** The decision of a request admitted from the lease: the store's numbers, plus the units the lease still holds. */
  answer(now: number): Decision {
    const { decision, policy } = this;
    const remaining = decision.remaining + this.units - this.next;
    const resetAfterMs = Math.max(0, decision.resetAfterMs - Math.floor(now - this.sentAt));
    return {
      allowed: true,
      limit: decision.limit,
      remaining,
      resetAfterMs,
      retryAfterMs: 0,
      policies: [policyDecision(policy, true, remaining, resetAfterMs, 0)],
      decidedAt: decision.decidedAt,
    };
  }

  /** The units after the last one used or skipped: what goes back to the store. */
  get unused(): number {
    return this.units - this.next;
  }

  /** The units whose time passed before a request used them (a bucket's). */
  get skipped(): number {
    return this.next - this.used;
  }
}
