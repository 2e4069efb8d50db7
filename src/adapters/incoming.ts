import type { IncomingMessage, ServerResponse } from 'node:http';
import {
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

export type { Denial, DenialResponse, RateLimitInfo, RateLimitOptions } from './core.js';

// What the adapters over node:http (plain, Express, Fastify, Koa, NestJS) share; sluice/node
// exports only what its docs name.

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
