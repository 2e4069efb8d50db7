import type { Context, MiddlewareHandler } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { InvalidOptionError } from '../core/errors.js';
import type { ClientAddressOptions } from '../http/client-address.js';
import { clientAddressOf, createRateLimit, type RateLimitInfo, type RateLimitOptions, type RequestFacts } from './core.js';

declare module 'hono' {
  interface ContextVariableMap {
    /** This request's rate limit, set by sluice's middleware: see RateLimitInfo. */
    rateLimit: RateLimitInfo | undefined;
  }
}

export type { Denial, DenialResponse, RateLimitInfo, RateLimitOptions, SluiceWarning, SluiceWarningCode, StoreFailurePolicy } from './core.js';

/** The runtime's connection info helper: `getConnInfo` from '@hono/node-server/conninfo', 'hono/bun', 'hono/deno', ... */
export type GetConnInfo = (c: Context) => { readonly remote: { readonly address?: string | undefined } };

export interface HonoRateLimitOptions extends RateLimitOptions<Context> {
  /** Required unless `key` is given: only the runtime knows the client's address. */
  getConnInfo?: GetConnInfo;
}

function honoFacts(c: Context, getConnInfo: GetConnInfo | undefined): RequestFacts {
  return {
    header: (name) => c.req.header(name),
    get remoteAddress() {
      return getConnInfo?.(c).remote.address;
    },
  };
}

/** The middleware's default key for this request's client: `key: (c) => c.get('user')?.id ?? clientAddress(c, { getConnInfo })`. */
export function clientAddress(c: Context, options: ClientAddressOptions & { getConnInfo: GetConnInfo }): string {
  const { getConnInfo, ...addressOptions } = options;
  return clientAddressOf((context: Context) => honoFacts(context, getConnInfo))(c, addressOptions);
}

/**
 * Hono middleware; callbacks receive the context.
 *
 *     app.use(rateLimit({ limiter, getConnInfo }));
 */
export function rateLimit(options: HonoRateLimitOptions): MiddlewareHandler {
  const decide = createRateLimit(options, { options: ['getConnInfo'] });
  const { getConnInfo, key } = options;
  if (typeof getConnInfo !== 'function' && key === undefined) {
    throw new InvalidOptionError('getConnInfo', getConnInfo, "your runtime's getConnInfo (from '@hono/node-server/conninfo', 'hono/bun', 'hono/deno', ...) so clients can be keyed by address, or a `key` function");
  }
  return async function sluiceRateLimit(c, next) {
    const outcome = await decide(c, honoFacts(c, getConnInfo));
    if (!outcome.pass) return c.body(outcome.body, outcome.status as ContentfulStatusCode, { ...outcome.headers, 'Content-Type': outcome.contentType });
    c.set('rateLimit', outcome.rateLimit);
    await next();
    // Hono has handled the handler's error by now: c.res is what is sent, a 500 for a throw.
    outcome.responded?.(c.res.status);
    // After the handler, so the fields land on whatever Response it produced.
    for (const [name, value] of Object.entries(outcome.headers)) c.header(name, value);
  };
}
