import type { DefaultContext, DefaultState, Middleware, ParameterizedContext } from 'koa';
import { clientAddressOf, createRateLimit, type RateLimitInfo } from './middleware.js';
import { type RateLimitOptions } from './middleware-options.js';

declare module 'koa' {
  interface DefaultState {
    /** This request's rate limit, set by sluice's middleware: see RateLimitInfo. */
    rateLimit?: RateLimitInfo;
  }
}
import { incomingFacts, onResponseEnd } from './node-http.js';

export type { RateLimitInfo } from './middleware.js';
export type { RateLimitOptions } from './middleware-options.js';
export type { Denial, DenialResponse } from './denial.js';

// Structural, so a context of any State type fits.
type KoaRequest = Pick<ParameterizedContext, 'req' | 'ip'>;
const koaAddress = (ctx: KoaRequest) => ctx.ip;
const koaFacts = (ctx: KoaRequest) => incomingFacts(ctx.req, ctx, ctx, koaAddress);
const KOA = { proxySetting: "Koa's `app.proxy` (ctx.ip)" };

/** The middleware's default key for this request's client: `key: (ctx) => ctx.state.user?.id ?? clientAddress(ctx)`. */
export const clientAddress = clientAddressOf(koaFacts, KOA.proxySetting);

/**
 * Koa middleware; callbacks receive the context.
 *
 *     app.use(rateLimit({ limiter }));
 */
export function rateLimit<State = DefaultState, Context = DefaultContext>(
  options: RateLimitOptions<ParameterizedContext<State, Context>, ParameterizedContext<State, Context>>,
): Middleware<State, Context> {
  const decide = createRateLimit(options, KOA);
  return async function sluiceRateLimit(ctx, next) {
    const outcome = await decide(ctx, koaFacts(ctx));
    ctx.set({ ...outcome.headers });
    if (outcome.pass) {
      // Under the app's own State type too, which need not declare it.
      (ctx.state as { rateLimit?: RateLimitInfo }).rateLimit = outcome.rateLimit;
      onResponseEnd(ctx.res, outcome.responded);
      await next();
      return;
    }
    ctx.status = outcome.status;
    ctx.type = outcome.contentType;
    ctx.body = outcome.body;
  };
}
