import { InvalidOptionError } from '../core/errors.js';
import type { Decision, Policy } from '../core/types.js';

/**
 * Which rate-limit header fields to send (units in docs/headers.md):
 * - 'draft-11': `RateLimit-Policy` and `RateLimit`, one item per policy (draft-ietf-httpapi-ratelimit-headers-11).
 * - 'draft-7': one `RateLimit` dictionary `limit=, remaining=, reset=` and `RateLimit-Policy: <q>;w=<s>`.
 * - 'draft-6': `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` and `RateLimit-Policy`.
 * - 'legacy': `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (epoch seconds, as GitHub).
 * - false: none. `Retry-After` is sent on every denial whatever the mode.
 */
export type HeaderMode = 'draft-11' | 'draft-7' | 'draft-6' | 'legacy' | false;

export const HEADER_MODES: readonly HeaderMode[] = ['draft-11', 'draft-7', 'draft-6', 'legacy', false];

/** One policy of a limiter and the decision it gave for this request. */
export interface PolicyDecision {
  readonly policy: Policy;
  readonly decision: Decision;
}

export type HeaderFields = Readonly<Record<string, string>>;

/** Whole seconds, rounded up: a client that waits this long is past the moment in question. */
export const seconds = (ms: number): number => Math.ceil(ms / 1000);

/** draft-11: every policy is an item named by the policy; `w` and `t` in seconds. */
export function draft11Headers(entries: readonly PolicyDecision[]): HeaderFields {
  return {
    'RateLimit-Policy': entries.map(({ policy }) => `"${policy.name}";q=${policy.limit};w=${seconds(policy.windowMs)}`).join(', '),
    RateLimit: entries.map(({ policy, decision }) => `"${policy.name}";r=${decision.remaining};t=${seconds(decision.resetAfterMs)}`).join(', '),
  };
}

/**
 * Drafts before 8 describe a single quota. When several policies apply, the one that constrains
 * the client most speaks: a policy that denied, else the one with the fewest requests remaining
 * (the longer reset on a tie), so a client following these headers never exceeds any policy.
 */
export function tightest(entries: readonly PolicyDecision[]): PolicyDecision {
  const [first, ...rest] = entries;
  if (first === undefined) throw new RangeError('rate-limit headers need at least one policy');
  return rest.reduce((best, entry) => (tighter(entry.decision, best.decision) ? entry : best), first);
}

function tighter(a: Decision, b: Decision): boolean {
  if (a.allowed !== b.allowed) return !a.allowed;
  if (a.remaining !== b.remaining) return a.remaining < b.remaining;
  return a.resetAfterMs > b.resetAfterMs;
}

/** draft-7: `RateLimit: limit=100, remaining=50, reset=5` and `RateLimit-Policy: 100;w=60`. */
export function draft7Headers(entries: readonly PolicyDecision[]): HeaderFields {
  const { policy, decision } = tightest(entries);
  return {
    'RateLimit-Policy': `${policy.limit};w=${seconds(policy.windowMs)}`,
    RateLimit: `limit=${policy.limit}, remaining=${decision.remaining}, reset=${seconds(decision.resetAfterMs)}`,
  };
}

/** draft-6: three fields plus `RateLimit-Policy: 100;w=60`; the reset is delta seconds. */
export function draft6Headers(entries: readonly PolicyDecision[]): HeaderFields {
  const { policy, decision } = tightest(entries);
  return {
    'RateLimit-Policy': `${policy.limit};w=${seconds(policy.windowMs)}`,
    'RateLimit-Limit': String(policy.limit),
    'RateLimit-Remaining': String(decision.remaining),
    'RateLimit-Reset': String(seconds(decision.resetAfterMs)),
  };
}

/**
 * The `X-RateLimit-*` fields most clients know from GitHub. `X-RateLimit-Reset` is the Unix time
 * in seconds (rounded up) at which the quota resets, as GitHub sends it; it is computed from this
 * server's clock (`nowMs`), the same clock that writes the `Date` header clients compare it with.
 */
export function legacyHeaders(entries: readonly PolicyDecision[], nowMs: number): HeaderFields {
  const { policy, decision } = tightest(entries);
  return {
    'X-RateLimit-Limit': String(policy.limit),
    'X-RateLimit-Remaining': String(decision.remaining),
    'X-RateLimit-Reset': String(seconds(nowMs + decision.resetAfterMs)),
  };
}

/** The rate-limit fields of one mode, without Retry-After. */
export function modeHeaders(mode: HeaderMode, entries: readonly PolicyDecision[], nowMs: number): HeaderFields {
  switch (mode) {
    case 'draft-11':
      return draft11Headers(entries);
    case 'draft-7':
      return draft7Headers(entries);
    case 'draft-6':
      return draft6Headers(entries);
    case 'legacy':
      return legacyHeaders(entries, nowMs);
    case false:
      return {};
  }
}

export function validHeaderMode(value: unknown): HeaderMode {
  if (value === undefined) return 'draft-11';
  if (!HEADER_MODES.includes(value as HeaderMode)) {
    throw new InvalidOptionError('headers', value, `one of ${HEADER_MODES.map((mode) => JSON.stringify(mode)).join(', ')}`);
  }
  return value as HeaderMode;
}

/**
 * The policies that denied this request. A client must wait for the slowest of them, so
 * `Retry-After` is their longest wait, in whole seconds rounded up.
 */
export function violated(entries: readonly PolicyDecision[]): { readonly policies: readonly PolicyDecision[]; readonly retryAfterMs: number } {
  const policies = entries.filter(({ decision }) => !decision.allowed);
  return { policies, retryAfterMs: Math.max(0, ...policies.map(({ decision }) => decision.retryAfterMs)) };
}

/** Every header for a request: the mode's fields, and `Retry-After` (RFC 9110) when any policy denied it. */
export function rateLimitHeaders(entries: readonly PolicyDecision[], mode: HeaderMode = 'draft-11', nowMs = Date.now()): HeaderFields {
  const headers: Record<string, string> = { ...modeHeaders(mode, entries, nowMs) };
  const denied = violated(entries);
  if (denied.policies.length > 0) headers['Retry-After'] = String(seconds(denied.retryAfterMs));
  return headers;
}

export interface RateLimitResponse {
  /** 429 when the request was denied, else 200 (let the handler pick its own success status). */
  readonly status: 200 | 429;
  readonly statusText: 'OK' | 'Too Many Requests';
  /** Header names in their canonical case; values ready to send. */
  readonly headers: HeaderFields;
}

/**
 * Status and draft-11 headers for one policy's decision, framework-neutral.
 * - `RateLimit-Policy` and `RateLimit`: `"name";q=<quota>;w=<window s>` and `"name";r=<remaining>;t=<s until the quota resets>`.
 * - `Retry-After` on a denial: whole seconds, rounded up, so a client that waits that long is admitted.
 */
export function rateLimitResponse(decision: Decision, policy: Policy): RateLimitResponse {
  const headers = rateLimitHeaders([{ policy, decision }]);
  return decision.allowed ? { status: 200, statusText: 'OK', headers } : { status: 429, statusText: 'Too Many Requests', headers };
}
