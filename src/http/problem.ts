import type { PolicyDecision } from '../core/types.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

// The reason phrases of the error statuses, as node:http's STATUS_CODES spells them, so that a
// title reads the same in every runtime (test/http/problem.test.ts compares them).
const REASON_PHRASES: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  402: 'Payment Required',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  406: 'Not Acceptable',
  407: 'Proxy Authentication Required',
  408: 'Request Timeout',
  409: 'Conflict',
  410: 'Gone',
  411: 'Length Required',
  412: 'Precondition Failed',
  413: 'Payload Too Large',
  414: 'URI Too Long',
  415: 'Unsupported Media Type',
  416: 'Range Not Satisfiable',
  417: 'Expectation Failed',
  418: "I'm a Teapot",
  421: 'Misdirected Request',
  422: 'Unprocessable Entity',
  423: 'Locked',
  424: 'Failed Dependency',
  425: 'Too Early',
  426: 'Upgrade Required',
  428: 'Precondition Required',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  451: 'Unavailable For Legal Reasons',
  500: 'Internal Server Error',
  501: 'Not Implemented',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
  505: 'HTTP Version Not Supported',
  506: 'Variant Also Negotiates',
  507: 'Insufficient Storage',
  508: 'Loop Detected',
  509: 'Bandwidth Limit Exceeded',
  510: 'Not Extended',
  511: 'Network Authentication Required',
};

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
    ? {
        type: `${PROBLEM_TYPES}#temporary-reduced-capacity`,
        title: 'Service Unavailable: capacity is temporarily reduced',
        status,
        'violated-policies': names,
      }
    : {
        type: `${PROBLEM_TYPES}#quota-exceeded`,
        title: `${REASON_PHRASES[status] ?? `Error ${status}`}: the quota of this client is exceeded`,
        status,
        'violated-policies': names,
      };
}

/** The body of a request denied because the store failed and `onStoreError` is 'deny'. */
export const storeUnavailableProblem = {
  type: 'about:blank',
  title: 'Service Unavailable',
  status: 503,
  detail: 'The rate limiter cannot reach its store, and it is set to deny requests then.',
} as const;
