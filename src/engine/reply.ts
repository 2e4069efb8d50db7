import type { Reply } from './script.js';

/** One policy's part of a reply. */
export interface PolicyReply {
  /** Whether this policy alone admits the request. */
  readonly allowed: boolean;
  /** Requests of cost 1 it admits after this one; never negative. */
  readonly remaining: number;
  readonly resetAfterMs: number;
  readonly retryAfterMs: number;
  /** acquire: the first id of the lease a concurrency policy gave (0: none). */
  readonly leaseId: number;
}

/** The driver's reply (see Reply), by name. */
export interface DecodedReply {
  /** limit, peek: whether every policy admits; the other ops: whether the call changed anything. */
  readonly allowed: boolean;
  /** The server's time when it decided, in ms. */
  readonly nowMs: number;
  /** How much longer the key is blocked, in ms (0: not blocked). */
  readonly blockedForMs: number;
  /** limit and peek only: each policy's part, in the call's order. */
  readonly policies: readonly PolicyReply[];
}

/** Numbers before the policies' parts, and in each part. */
const HEAD = 3;
const PER_POLICY = 5;

/** Reads a reply of the driver (Lua or twin), whose policies' parts follow its head (limit and peek) or are absent (every other op). */
export function decodeReply(reply: Reply): DecodedReply {
  const policies: PolicyReply[] = [];
  for (let at = HEAD; at + PER_POLICY <= reply.length; at += PER_POLICY) {
    policies.push({
      allowed: reply[at] === 1,
      remaining: reply[at + 1] ?? 0,
      resetAfterMs: reply[at + 2] ?? 0,
      retryAfterMs: reply[at + 3] ?? 0,
      leaseId: reply[at + 4] ?? 0,
    });
  }
  return { allowed: reply[0] === 1, nowMs: reply[1] ?? 0, blockedForMs: reply[2] ?? 0, policies };
}
