import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRateLimit, type Outcome, type RateLimitOptions, type RequestFacts } from './core.js';

export type { Denial, RateLimitOptions, SluiceWarning, SluiceWarningCode, StoreFailurePolicy } from './core.js';

/** The facts of a node:http request (also an Express request, which extends it). */
export function incomingFacts(req: IncomingMessage): RequestFacts {
  return {
    header(name) {
      const value = req.headers[name];
      return Array.isArray(value) ? value.join(', ') : value;
    },
    remoteAddress: req.socket.remoteAddress,
  };
}

/** Sets the headers of a passing request, or sends the whole denial. True when the request may go on. */
export function applyOutcome(res: ServerResponse, outcome: Outcome): boolean {
  for (const [name, value] of Object.entries(outcome.headers)) res.setHeader(name, value);
  if (outcome.pass) return true;
  res.statusCode = outcome.status;
  res.setHeader('Content-Type', outcome.contentType);
  res.end(outcome.body);
  return false;
}

/**
 * Rate limiting for a plain node:http server. The returned function resolves true when the
 * request may go on (its rate-limit headers are set), false when it has answered the request.
 *
 *     const limit = rateLimit({ limiter });
 *     createServer(async (req, res) => { if (await limit(req, res)) res.end('hello') });
 */
export function rateLimit<Req extends IncomingMessage = IncomingMessage>(options: RateLimitOptions<Req>): (req: Req, res: ServerResponse) => Promise<boolean> {
  const decide = createRateLimit(options);
  return async function sluiceRateLimit(req, res) {
    return applyOutcome(res, await decide(req, incomingFacts(req)));
  };
}
