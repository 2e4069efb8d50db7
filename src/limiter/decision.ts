import { bindingPolicy, policyDecision } from '../core/binding.js';
import type { Decision, Policy, PolicyDecision } from '../core/types.js';
import {
  policyAllowed,
  policyRemaining,
  policyResetAfterMs,
  policyRetryAfterMs,
  replyAllowed,
  replyBlockedForMs,
  replyNowMs,
} from '../engine/reply.js';
import type { Reply } from '../engine/script.js';

/** Each policy's numbers, and the decision: the numbers of the binding policy (core/binding.ts). */
export function decisionOf(reply: Reply, policies: readonly Policy[]): Decision {
  // A loop, not map(): no closure per decision, on the memory store's hot path.
  const perPolicy = new Array<PolicyDecision>(policies.length);
  for (let i = 0; i < policies.length; i++) {
    // V8: Math.min(x) holds x as a small integer, not a boxed heap number (bench/NOTES.md).
    perPolicy[i] = policyDecision(
      policies[i] as Policy,
      policyAllowed(reply, i),
      Math.min(policyRemaining(reply, i)),
      Math.min(policyResetAfterMs(reply, i)),
      Math.min(policyRetryAfterMs(reply, i)),
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

/** A decision as shadow mode answers it: allowed, marked `shadowDenied` when the store denied it. */
export function shadowed<T extends Decision>(decision: T): T {
  return { ...decision, allowed: true, retryAfterMs: 0, shadow: true, shadowDenied: !decision.allowed };
}
