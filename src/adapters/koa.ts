import type { IncomingMessage } from 'node:http';
import { createRateLimit, type RateLimitOptions } from './core.js';
import { incomingFacts } from './node.js';

export type { Denial, RateLimitOptions, SluiceWarning, SluiceWarningCode, StoreFailurePolicy } from './core.js';

/** The part of a Koa context the middleware uses; Koa's own Context satisfies it. */
export interface KoaContextLike {
  readonly req: IncomingMessage;
  set(fields: Record<string, string>): void;
  status: number;
  type: string;
  body: unknown;
}

/**
 * Koa middleware; callbacks receive the context.
 *
 *     app.use(rateLimit({ limiter }));
 */
export function rateLimit<Ctx extends KoaContextLike = KoaContextLike>(options: RateLimitOptions<Ctx>): (ctx: Ctx, next: () => Promise<unknown>) => Promise<void> {
  const decide = createRateLimit(options);
  return async function sluiceRateLimit(ctx, next) {
    const outcome = await decide(ctx, incomingFacts(ctx.req));
    ctx.set({ ...outcome.headers });
    if (outcome.pass) {
      await next();
      return;
    }
    ctx.status = outcome.status;
    ctx.type = outcome.contentType;
    ctx.body = outcome.body;
  };
}
