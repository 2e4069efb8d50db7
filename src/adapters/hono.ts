import type { Context, MiddlewareHandler } from 'hono';
import { InvalidOptionError } from '../core/errors.js';
import { createRateLimit, type RateLimitOptions } from './core.js';

export type { Denial, RateLimitOptions, SluiceWarning, SluiceWarningCode, StoreFailurePolicy } from './core.js';

/** The runtime's connection info helper: `getConnInfo` from '@hono/node-server/conninfo', 'hono/bun', 'hono/deno', ... */
export type GetConnInfo = (c: Context) => { readonly remote: { readonly address?: string | undefined } };

export interface HonoRateLimitOptions extends RateLimitOptions<Context> {
  /** Required unless `key` is given: only the runtime knows the client's address. */
  getConnInfo?: GetConnInfo;
}

/**
 * Hono middleware; callbacks receive the context.
 *
 *     app.use(rateLimit({ limiter, getConnInfo }));
 */
export function rateLimit(options: HonoRateLimitOptions): MiddlewareHandler {
  const decide = createRateLimit(options);
  const { getConnInfo, key } = options;
  if (typeof getConnInfo !== 'function' && key === undefined) {
    throw new InvalidOptionError('getConnInfo', getConnInfo, "your runtime's getConnInfo (from '@hono/node-server/conninfo', 'hono/bun', 'hono/deno', ...) so clients can be keyed by address, or a `key` function");
  }
  return async function sluiceRateLimit(c, next) {
    const outcome = await decide(c, {
      header: (name) => c.req.header(name),
      get remoteAddress() {
        return getConnInfo?.(c).remote.address;
      },
    });
    if (!outcome.pass) return c.body(outcome.body, outcome.status, { ...outcome.headers, 'Content-Type': outcome.contentType });
    await next();
    // After the handler, so the fields land on whatever Response it produced.
    for (const [name, value] of Object.entries(outcome.headers)) c.header(name, value);
  };
}
