import type { Reply } from './script.js';

/*
 * The driver's reply (see Reply), read by name. The accessors read one field without allocating,
 * for the limiter's hot path; decodeReply reads all of them into an object.
 */

/** Numbers before the policies' parts, and in each part. */
const HEAD = 3;
const PER_POLICY = 5;

/** How many numbers a limit's or peek's reply holds for `policies` policies. */
export const decisionReplyLength = (policies: number): number => HEAD + policies * PER_POLICY;

/** The server's time when it decided, in ms. */
export const replyNowMs = (reply: Reply): number => reply[0] ?? 0;
/** limit, peek: whether every policy admits; the other ops: whether the call changed anything. */
export const replyAllowed = (reply: Reply): boolean => reply[1] === 1;
/** How much longer the key is blocked, in ms (0: not blocked). */
export const replyBlockedForMs = (reply: Reply): number => reply[2] ?? 0;
/** Whether policy `i` alone admits the request. */
export const policyAllowed = (reply: Reply, i: number): boolean => reply[HEAD + i * PER_POLICY] === 1;
/** Requests of cost 1 policy `i` admits after this one; never negative. */
export const policyRemaining = (reply: Reply, i: number): number => reply[HEAD + i * PER_POLICY + 1] ?? 0;
export const policyResetAfterMs = (reply: Reply, i: number): number => reply[HEAD + i * PER_POLICY + 2] ?? 0;
export const policyRetryAfterMs = (reply: Reply, i: number): number => reply[HEAD + i * PER_POLICY + 3] ?? 0;
/** acquire: the first id of the lease concurrency policy `i` gave (0: none). */
export const policyLeaseId = (reply: Reply, i: number): number => reply[HEAD + i * PER_POLICY + 4] ?? 0;
/** take: the units policy `i` took (0: denied); the same field as a lease id. */
export const policyUnitsTaken = policyLeaseId;

/** One policy's part of a reply. */
export interface PolicyReply {
  readonly allowed: boolean;
  readonly remaining: number;
  readonly resetAfterMs: number;
  readonly retryAfterMs: number;
  readonly leaseId: number;
}

/** A whole reply, by name. */
export interface DecodedReply {
  readonly allowed: boolean;
  readonly nowMs: number;
  readonly blockedForMs: number;
  /** limit and peek only: each policy's part, in the call's order (every other op has none). */
  readonly policies: readonly PolicyReply[];
}

export function decodeReply(reply: Reply): DecodedReply {
  const policies: PolicyReply[] = [];
  for (let i = 0; HEAD + (i + 1) * PER_POLICY <= reply.length; i++) {
    policies.push({
      allowed: policyAllowed(reply, i),
      remaining: policyRemaining(reply, i),
      resetAfterMs: policyResetAfterMs(reply, i),
      retryAfterMs: policyRetryAfterMs(reply, i),
      leaseId: policyLeaseId(reply, i),
    });
  }
  return {
    allowed: replyAllowed(reply),
    nowMs: replyNowMs(reply),
    blockedForMs: replyBlockedForMs(reply),
    policies,
  };
}
