import type { Policy, PolicyDecision } from './types.js';

/**
 * A policy's part in a decision: the policy's facts and its numbers. One literal, on the hot path of
 * every decision, where a spread of the facts costs far more (docs/performance.md, "In process").
 */
export function policyDecision(
  policy: Policy,
  allowed: boolean,
  remaining: number,
  resetAfterMs: number,
  retryAfterMs: number,
): PolicyDecision {
  return {
    name: policy.name,
    algorithm: policy.algorithm,
    counts: policy.counts,
    limit: policy.limit,
    windowMs: policy.windowMs,
    allowed,
    remaining,
    resetAfterMs,
    retryAfterMs,
  };
}

/**
 * The binding policy of a decision: the one whose numbers speak for it where a single quota is
 * told (the decision's own fields, Retry-After, the draft-6 and draft-7 and legacy headers).
 * - Some policy denied: of those, the one with the longest wait, since the request is admitted
 *   only when that one admits it; so Retry-After and the headers describe the same policy.
 * - Every policy admits: the one with the fewest requests remaining, the first to deny.
 * Ties go to the fewer remaining, then to the longer reset, then to the earlier in the list. A
 * client that follows the binding policy's numbers exceeds no policy.
 */
export function bindingPolicy<P extends PolicyDecision>(policies: readonly P[]): P {
  const first = policies[0];
  if (first === undefined) throw new RangeError('a decision has at least one policy');
  let binding: P = first;
  // A loop, not a spread and reduce(): no array per decision, on the memory store's hot path.
  for (let i = 1; i < policies.length; i++) {
    const policy = policies[i] as P;
    if (binds(policy, binding)) binding = policy;
  }
  return binding;
}

/** Whether `a` binds rather than `b`. */
function binds(a: PolicyDecision, b: PolicyDecision): boolean {
  if (a.allowed !== b.allowed) return !a.allowed;
  if (!a.allowed && a.retryAfterMs !== b.retryAfterMs) return a.retryAfterMs > b.retryAfterMs;
  if (a.remaining !== b.remaining) return a.remaining < b.remaining;
  return a.resetAfterMs > b.resetAfterMs;
}
