import type { IncomingMessage, ServerResponse } from 'node:http';
import type { DashboardHandler } from '../dashboard/handler.js';
import type { HeaderFields } from '../http/headers.js';
import { createRateLimit, type Outcome, type RateLimitInfo, type RequestFacts, type Responded } from './middleware.js';
import { type AdapterSpec, type RateLimitOptions } from './middleware-options.js';

declare module 'node:http' {
  interface IncomingMessage {
    /** This request's rate limit, set by sluice's node:http or Express middleware: see RateLimitInfo. */
    rateLimit?: RateLimitInfo;
  }
}

export type { RateLimitInfo } from './middleware.js';
export type { RateLimitOptions } from './middleware-options.js';
export type { Denial, DenialResponse } from './denial.js';

// What the adapters over node:http (plain, Express, Fastify, Koa, NestJS) share; sluice/node
// exports only what its docs name.

/**
 * The facts of a node:http request (also under Express, Fastify and Koa), made for every request:
 * a class, so that they share one map and their methods, where a literal with a getter and a
 * closure made both anew each time.
 */
class IncomingFacts<Request> implements RequestFacts {
  readonly remoteAddress: string | undefined;

  constructor(
    private readonly req: IncomingMessage,
    readonly response: unknown,
    private readonly request: Request,
    private readonly addressOf: ((request: Request) => string | undefined) | undefined,
  ) {
    this.remoteAddress = req.socket.remoteAddress;
  }

  header(name: string): string | undefined {
    const value = this.req.headers[name];
    return Array.isArray(value) ? value.join(', ') : value;
  }

  get frameworkAddress(): string | undefined {
    return this.addressOf?.(this.request);
  }
}

/**
 * The facts of `req`, the node:http request under the framework's `request` (the same object on
 * Express), and the client address by the framework's own proxy setting, where it has one:
 * `addressOf(request)`, read only when asked.
 */
export function incomingFacts<Request = IncomingMessage>(
  req: IncomingMessage,
  response?: unknown,
  request?: Request,
  addressOf?: (request: Request) => string | undefined,
): RequestFacts {
  return new IncomingFacts(req, response, request as Request, addressOf);
}

/** Tells `responded` how this response ends: its status once sent, or undefined when cut off first. */
export function onResponseEnd(res: ServerResponse, responded: Responded | undefined): void {
  if (!responded) return;
  const report = () => responded(res.writableFinished ? res.statusCode : undefined);
  // A client that left while the request was decided (an async key, a slow store) has closed it already.
  if (res.closed || res.destroyed) report();
  else res.once('close', report);
}

/** Sets each of `headers` on `res` (a loop over their names: Object.entries would make an array for each field). */
export function setHeaders(res: ServerResponse, headers: HeaderFields): void {
  for (const name of Object.keys(headers)) res.setHeader(name, headers[name] as string);
}

/** Sets the headers of a passing request, or sends the whole denial. True when the request may go on. */
export function applyOutcome(res: ServerResponse, outcome: Outcome): boolean {
  setHeaders(res, outcome.headers);
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
  factsOf: (req: Req, res: Res) => RequestFacts = (req, res) => incomingFacts(req, res),
  adapter: AdapterSpec = {},
): (req: Req, res: Res) => Promise<boolean> {
  const decide = createRateLimit(options, adapter);
  return (req, res) =>
    decide(req, factsOf(req, res)).then((outcome) => {
      if (outcome.pass) req.rateLimit = outcome.rateLimit;
      return applyOutcome(res, outcome);
    });
}

/** The dashboard's handler answering a node:http request (plain, Express, Fastify's raw), by the socket's address. */
export function answerDashboard(
  handle: DashboardHandler,
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  return async (req, res) => {
    const answer = await handle({
      method: req.method ?? 'GET',
      url: req.url ?? '/',
      authorization: req.headers.authorization,
      remoteAddress: req.socket.remoteAddress,
    });
    res.writeHead(answer.status, { ...answer.headers, 'Content-Length': Buffer.byteLength(answer.body) });
    res.end(req.method === 'HEAD' ? undefined : answer.body);
  };
}
