import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  clientAddressOf,
  createRateLimit,
  type AdapterSpec,
  type Outcome,
  type RateLimitInfo,
  type RateLimitOptions,
  type RequestFacts,
  type Responded,
} from './core.js';

declare module 'node:http' {
  interface IncomingMessage {
    /** This request's rate limit, set by sluice's node:http or Express middleware: see RateLimitInfo. */
    rateLimit?: RateLimitInfo;
  }
}

export type {
  Denial,
  DenialResponse,
  RateLimitInfo,
  RateLimitOptions,
  SluiceWarning,
  SluiceWarningCode,
  StoreFailurePolicy,
} from './core.js';

/**
 * The facts of a node:http request (also under Express, Fastify and Koa), and the client address
 * by the framework's own proxy setting, where it has one (read only when asked).
 */
export function incomingFacts(
  req: IncomingMessage,
  frameworkAddress?: () => string | undefined,
  response?: unknown,
): RequestFacts {
  return {
    response,
    header(name) {
      const value = req.headers[name];
      return Array.isArray(value) ? value.join(', ') : value;
    },
    remoteAddress: req.socket.remoteAddress,
    get frameworkAddress() {
      return frameworkAddress?.();
    },
  };
}

/** The middleware's default key for this request's client: `key: (req) => userOf(req) ?? clientAddress(req)`. */
export const clientAddress = clientAddressOf((req: IncomingMessage) => incomingFacts(req));

/** Tells `responded` how this response ends: its status once sent, or undefined when cut off first. */
export function onResponseEnd(res: ServerResponse, responded: Responded | undefined): void {
  if (responded) res.once('close', () => responded(res.writableFinished ? res.statusCode : undefined));
}

/** Sets the headers of a passing request, or sends the whole denial. True when the request may go on. */
export function applyOutcome(res: ServerResponse, outcome: Outcome): boolean {
  for (const [name, value] of Object.entries(outcome.headers)) res.setHeader(name, value);
  if (outcome.pass) {
    onResponseEnd(res, outcome.responded);
    return true;
  }
  res.statusCode = outcome.status;
  res.setHeader('Content-Type', outcome.contentType);
  res.end(outcome.body);
  return false;
}

/** Decides and applies; rejects when one of the user's callbacks throws (Express passes that to `next`). */
export function limitIncoming<Req extends IncomingMessage, Res extends ServerResponse>(
  options: RateLimitOptions<Req, Res>,
  factsOf: (req: Req, res: Res) => RequestFacts = (req, res) => incomingFacts(req, undefined, res),
  adapter: AdapterSpec = {},
): (req: Req, res: Res) => Promise<boolean> {
  const decide = createRateLimit(options, adapter);
  return async (req, res) => {
    const outcome = await decide(req, factsOf(req, res));
    if (outcome.pass) req.rateLimit = outcome.rateLimit;
    return applyOutcome(res, outcome);
  };
}

/**
 * Rate limiting for a plain node:http server. The returned function resolves true when the
 * request may go on (its rate-limit headers are set), false when it has answered the request.
 * It never rejects: node:http has no error handler, and a rejection there would end the process.
 * When one of your callbacks throws, it logs the error, answers 500 and resolves false, as
 * Express's and Koa's default error handlers do.
 *
 *     const limit = rateLimit({ limiter });
 *     createServer((req, res) => void limit(req, res).then((allowed) => allowed && res.end('hello')));
 */
export function rateLimit<Req extends IncomingMessage = IncomingMessage>(
  options: RateLimitOptions<Req, ServerResponse>,
): (req: Req, res: ServerResponse) => Promise<boolean> {
  const limit = limitIncoming(options);
  return async function sluiceRateLimit(req, res) {
    try {
      return await limit(req, res);
    } catch (error) {
      console.error(error);
      if (!res.headersSent) res.statusCode = 500;
      res.end();
      return false;
    }
  };
}
