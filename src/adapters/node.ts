import type { IncomingMessage, ServerResponse } from 'node:http';
import { dashboardHandler, type DashboardHandlerOptions } from '../dashboard/handler.js';
import type { Dashboard } from '../dashboard/recorder.js';
import { clientAddressOf } from './middleware.js';
import { type RateLimitOptions } from './middleware-options.js';
import { answerDashboard, incomingFacts, limitIncoming } from './node-http.js';

// Through node-http.ts, which declares `req.rateLimit` on node:http's IncomingMessage.
export type { Denial, DenialResponse, RateLimitInfo, RateLimitOptions } from './node-http.js';

/** The middleware's default key for this request's client: `key: (req) => userOf(req) ?? clientAddress(req)`. */
export const clientAddress = clientAddressOf((req: IncomingMessage) => incomingFacts(req));

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
  const answerFailure = (res: ServerResponse, error: unknown): false => {
    console.error(error);
    if (!res.headersSent) res.statusCode = 500;
    res.end();
    return false;
  };
  // Not an async function awaiting `limit`: that would add a promise and a turn of the microtask queue to every request.
  return function sluiceRateLimit(req, res) {
    try {
      return limit(req, res).then(undefined, (error: unknown) => answerFailure(res, error));
    } catch (error) {
      return Promise.resolve(answerFailure(res, error));
    }
  };
}

/**
 * The live dashboard (docs/dashboard.md) for a node:http server, wherever you route it: it answers
 * the page, `…/data` and `…/key`. It never rejects: a failure answers 500 and is logged.
 *
 *     const show = dashboard(recorder, { token });
 *     createServer((req, res) => req.url?.startsWith('/dashboard') ? void show(req, res) : app(req, res));
 */
export function dashboard(
  recorder: Dashboard,
  options?: DashboardHandlerOptions,
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const answer = answerDashboard(dashboardHandler(recorder, options));
  return (req, res) =>
    answer(req, res).catch((error: unknown) => {
      console.error(error);
      if (!res.headersSent) res.statusCode = 500;
      res.end();
    });
}
