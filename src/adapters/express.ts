import type { Request, RequestHandler, Response } from 'express';
import type { ClientAddressOptions } from '../http/client-address.js';
import { dashboardHandler, type DashboardHandlerOptions } from '../dashboard/handler.js';
import type { Dashboard } from '../dashboard/recorder.js';
import { clientAddressOf } from './middleware.js';
import { type RateLimitOptions } from './middleware-options.js';
import { answerDashboard, incomingFacts, limitIncoming } from './node-http.js';

const expressAddress = (req: Request) => req.ip;
const expressFacts = (req: Request, res?: Response) => incomingFacts(req, res, req, expressAddress);
const EXPRESS = { proxySetting: "Express's `trust proxy` (req.ip)" };

/** The middleware's default key for this request's client: `key: (req) => req.user?.id ?? clientAddress(req)`. */
export const clientAddress: (req: Request, options?: ClientAddressOptions) => string = clientAddressOf(
  expressFacts,
  EXPRESS.proxySetting,
);

// Through node-http.ts, which declares `req.rateLimit` on node:http's IncomingMessage.
export type { Denial, DenialResponse, RateLimitInfo, RateLimitOptions } from './node-http.js';

/**
 * Express (4 and 5) middleware; callbacks receive the Express request. Errors reach
 * `next(error)`, so Express 4, which ignores rejected promises, still sees them.
 *
 *     app.use(rateLimit({ limiter }));
 */
export function rateLimit(options: RateLimitOptions<Request, Response>): RequestHandler {
  const limit = limitIncoming(options, expressFacts, EXPRESS);
  return function sluiceRateLimit(req, res, next) {
    limit(req, res).then((pass) => {
      if (pass) next();
    }, next);
  };
}

/**
 * The live dashboard (docs/dashboard.md), mounted where you like; errors reach `next(error)`.
 *
 *     app.use('/dashboard', dashboard(recorder, { token }));
 */
export function dashboard(recorder: Dashboard, options?: DashboardHandlerOptions): RequestHandler {
  const answer = answerDashboard(dashboardHandler(recorder, options));
  return function sluiceDashboard(req, res, next) {
    answer(req, res).catch(next);
  };
}
