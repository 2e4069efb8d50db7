import type { DefaultContext, DefaultState, Middleware, ParameterizedContext } from 'koa';
import { clientAddressOf, createRateLimit, type RateLimitInfo, type RateLimitOptions } from './core.js';

declare module 'koa' {
  interface DefaultState {
    /** This request's rate limit, set by sluice's middleware: see RateLimitInfo. */
    rateLimit?: RateLimitInfo;
  }
}
import { incomingFacts, onResponseEnd } from './node.js';

export type { Denial, RateLimitInfo, RateLimitOptions, SluiceWarning, SluiceWarningCode, StoreFailurePolicy } from './core.js';

/** The middleware's default key for this request's client: `key: (ctx) => ctx.state.user?.id ?? clientAddress(ctx)`. */
export const clientAddress = clientAddressOf((ctx: ParameterizedContext) => incomingFacts(ctx.req));

/**
 * Koa middleware; callbacks receive the context.
 *
 *     app.use(rateLimit({ limiter }));
 */
export function rateLimit<State = DefaultState, Context = DefaultContext>(
  options: RateLimitOptions<ParameterizedContext<State, Context>>,
): Middleware<State, Context> {
  const decide = createRateLimit(options);
  return async function sluiceRateLimit(ctx, next) {
    const outcome = await decide(ctx, incomingFacts(ctx.req));
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
