import type { Decision } from '../core/types.js';

export interface RateLimitResponse {
  /** 429 when the request was denied, else 200 (let the handler pick its own success status). */
  readonly status: 200 | 429;
  readonly statusText: 'OK' | 'Too Many Requests';
  /** Header names in their canonical case; values ready to send. */
  readonly headers: Readonly<Record<string, string>>;
}

const seconds = (ms: number): number => Math.ceil(ms / 1000);

/**
 * Status and headers for a decision, framework-neutral.
 * - `RateLimit-Policy` and `RateLimit` as draft-ietf-httpapi-ratelimit-headers-11 defines them, one
 *   item per policy: `"name";q=<quota>;w=<window s>` and `"name";r=<remaining>;t=<s until reset>`.
 * - `Retry-After` (RFC 9110) on a denial: whole seconds, rounded up, so a client that waits that
 *   long is admitted.
 */
export function rateLimitResponse(decision: Decision): RateLimitResponse {
  const headers: Record<string, string> = {
    'RateLimit-Policy': decision.policies.map((p) => `"${p.name}";q=${p.limit};w=${seconds(p.windowMs)}`).join(', '),
    RateLimit: decision.policies.map((p) => `"${p.name}";r=${p.remaining};t=${seconds(p.resetAfterMs)}`).join(', '),
  };
  if (decision.allowed) return { status: 200, statusText: 'OK', headers };
  headers['Retry-After'] = String(seconds(decision.retryAfterMs));
  return { status: 429, statusText: 'Too Many Requests', headers };
}
