import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RateLimitOptions } from './core.js';
import { limitIncoming } from './node.js';

export type { Denial, RateLimitOptions, SluiceWarning, SluiceWarningCode, StoreFailurePolicy } from './core.js';

/**
 * Express (4 and 5) middleware. Errors reach `next(error)`, so Express 4, which ignores rejected
 * promises, still sees them. For typed callbacks, name the request type: `rateLimit<Request>({ ... })`.
 *
 *     app.use(rateLimit({ limiter }));
 */
export function rateLimit<Req extends IncomingMessage = IncomingMessage>(
  options: RateLimitOptions<Req>,
): (req: Req, res: ServerResponse, next: (error?: unknown) => void) => void {
  const limit = limitIncoming(options);
  return function sluiceRateLimit(req, res, next) {
    limit(req, res).then((pass) => {
      if (pass) next();
    }, next);
  };
}
