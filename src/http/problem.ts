import { STATUS_CODES } from 'node:http';
import type { PolicyDecision } from '../core/types.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

const PROBLEM_TYPES = 'https://iana.org/assignments/http-problem-types';

/** The RFC 9457 body of a denial, with the problem types that draft-ietf-httpapi-ratelimit-headers defines. */
export interface RateLimitProblem {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  /** The names of the policies whose quota was exceeded. */
  readonly 'violated-policies': readonly string[];
}

/**
 * 503 (load shedding): `temporary-reduced-capacity`, the server admits less than usual for now.
 * Any other status (429 by default): `quota-exceeded`, the client spent its quota.
 */
export function rateLimitProblem(status: number, violated: readonly PolicyDecision[]): RateLimitProblem {
  const names = violated.map((p) => p.name);
  return status === 503
    ? { type: `${PROBLEM_TYPES}#temporary-reduced-capacity`, title: 'Service Unavailable: capacity is temporarily reduced', status, 'violated-policies': names }
    : { type: `${PROBLEM_TYPES}#quota-exceeded`, title: `${STATUS_CODES[status] ?? `Error ${status}`}: the quota of this client is exceeded`, status, 'violated-policies': names };
}

/** The body of a request denied because the store failed and `onStoreError` is 'deny'. */
export const storeUnavailableProblem = {
  type: 'about:blank',
  title: 'Service Unavailable',
  status: 503,
  detail: 'The rate limiter cannot reach its store, and it is set to deny requests then.',
} as const;
