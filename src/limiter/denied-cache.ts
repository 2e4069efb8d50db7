import { InvalidOptionError } from '../core/errors.js';
import type { Decision } from '../core/types.js';
import { nestedOptions, positiveInteger } from '../core/validate.js';

export interface DeniedCacheOptions {
  /** The most denied keys remembered; past it the oldest is forgotten. */
  maxKeys: number;
  /** Measures elapsed time in ms (default: a monotonic clock). Tests pass the memory store's fake clock. */
  now?: () => number;
}

/** What the cache knows of one key: the store's denial, and when the request was sent. */
interface Denial {
  readonly sentAt: number;
  readonly until: number;
  readonly decision: Decision;
}

/**
 * Answers, from memory, cost-1 requests the store is certain to deny: after a cost-1 denial no
 * algorithm with stable denials admits anything, in any process, until its retryAfterMs, so each
 * gets the same denial, its times shorter by the time elapsed (counted from when the request was
 * sent, so a cached denial never outlasts the store's). A `reset()` through this limiter forgets
 * the key; one from another process is seen once the cached denial ends (docs/performance.md).
 */
export class DeniedCache {
  private readonly denials = new Map<string, Denial>();
  private readonly maxKeys: number;
  readonly now: () => number;

  constructor(options: unknown) {
    const o = nestedOptions('deniedCache', options, ['maxKeys', 'now']);
    this.maxKeys = positiveInteger('deniedCache.maxKeys', o.maxKeys);
    if (o.now !== undefined && typeof o.now !== 'function')
      throw new InvalidOptionError('deniedCache.now', o.now, 'a function returning ms');
    this.now = (o.now as (() => number) | undefined) ?? (() => performance.now());
  }

  /** The denial of a cost-1 request on this key, if the store is certain to give it now. */
  lookup(key: string): Decision | undefined {
    const denial = this.denials.get(key);
    if (denial === undefined) return undefined;
    const now = this.now();
    // Under a ms left, the store may already admit (its clock reads whole ms): ask it.
    if (denial.until - now < 1) {
      this.denials.delete(key);
      return undefined;
    }
    // Every time, shorter by the time elapsed; rounded down: never longer than the store's own
    // answer, whose clock reads whole ms.
    const left = (ms: number) => Math.max(0, Math.floor(denial.sentAt + ms - now));
    const { decision } = denial;
    return {
      ...decision,
      resetAfterMs: left(decision.resetAfterMs),
      retryAfterMs: left(decision.retryAfterMs),
      policies: decision.policies.map((p) => ({
        ...p,
        resetAfterMs: left(p.resetAfterMs),
        retryAfterMs: left(p.retryAfterMs),
      })),
      ...(decision.blockedForMs !== undefined && { blockedForMs: left(decision.blockedForMs) }),
      ...(decision.decidedAt !== undefined && { decidedAt: decision.decidedAt + Math.floor(now - denial.sentAt) }),
    };
  }

  /**
   * Learns from the store's answer to a cost-1 request sent at `sentAt`. Only a denial by every
   * policy, with nothing remaining in any, is certain to stand until it ends: a policy that still
   * had room would show more as time passes.
   */
  learn(key: string, decision: Decision, sentAt: number): void {
    if (decision.allowed || decision.reason !== undefined || decision.retryAfterMs <= 0) return;
    if (!decision.policies.every((p) => !p.allowed && p.remaining === 0)) return;
    this.denials.delete(key);
    this.denials.set(key, { sentAt, until: sentAt + decision.retryAfterMs, decision });
    if (this.denials.size > this.maxKeys) {
      const oldest = this.denials.keys().next();
      if (!oldest.done) this.denials.delete(oldest.value);
    }
  }

  forget(key: string): void {
    this.denials.delete(key);
  }
}
