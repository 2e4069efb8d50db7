import type { Context, MiddlewareHandler } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { InvalidOptionError } from '../core/errors.js';
import { dashboardHandler, type DashboardHandlerOptions } from '../dashboard/handler.js';
import type { Dashboard } from '../dashboard/recorder.js';
import type { ClientAddressOptions } from '../http/client-address.js';
import {
  clientAddressOf,
  createRateLimit,
  type RateLimitInfo,
  type RequestFacts,
  type Responded,
} from './middleware.js';
import { type RateLimitOptions } from './middleware-options.js';

declare module 'hono' {
  interface ContextVariableMap {
    /** This request's rate limit, set by sluice's middleware: see RateLimitInfo. */
    rateLimit: RateLimitInfo | undefined;
  }
}

export type { RateLimitInfo } from './middleware.js';
export type { RateLimitOptions } from './middleware-options.js';
export type { Denial, DenialResponse } from './denial.js';

/** The runtime's connection info helper: `getConnInfo` from '@hono/node-server/conninfo', 'hono/bun', 'hono/deno', ... */
export type GetConnInfo = (c: Context) => { readonly remote: { readonly address?: string | undefined } };

export interface HonoRateLimitOptions extends RateLimitOptions<Context, Context> {
  /** Required unless `key` is given: only the runtime knows the client's address. */
  getConnInfo?: GetConnInfo;
}

function honoFacts(c: Context, getConnInfo: GetConnInfo | undefined): RequestFacts {
  return {
    response: c,
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
    throw new InvalidOptionError(
      'getConnInfo',
      getConnInfo,
      "your runtime's getConnInfo (from '@hono/node-server/conninfo', 'hono/bun', 'hono/deno', ...) so clients can be keyed by address, or a `key` function",
    );
  }
  return async function sluiceRateLimit(c, next) {
    const outcome = await decide(c, honoFacts(c, getConnInfo));
    if (!outcome.pass)
      return c.body(outcome.body, outcome.status as ContentfulStatusCode, {
        ...outcome.headers,
        'Content-Type': outcome.contentType,
      });
    c.set('rateLimit', outcome.rateLimit);
    await next();
    // After the handler, so the fields land on whatever Response it produced.
    for (const [name, value] of Object.entries(outcome.headers)) c.header(name, value);
    // Hono has handled the handler's error by now: c.res is what is sent, a 500 for a throw.
    if (outcome.responded) c.res = reportingEnd(c, outcome.responded);
  };
}

/**
 * `c.res`, telling `responded` how it ends: its status once the runtime has read all of its
 * body, or undefined when the body is cancelled first or the request's signal has aborted. Runtimes
 * (Node's adapter, Bun, Deno, workerd) cancel a response's body when the client goes away mid-way,
 * and abort the request's signal when it went away before (while the request was decided), yet
 * may still read a short body whole.
 */
function reportingEnd(c: Context, responded: Responded): Response {
  const response = c.res;
  const { signal } = c.req.raw;
  const ended = () => responded(signal.aborted ? undefined : response.status);
  const source = response.body;
  // Hono answers HEAD with the GET route's status and headers and drops its body unread, so the
  // status is the whole answer: waiting on the body would never report.
  if (source === null || c.req.method === 'HEAD') {
    ended();
    return response;
  }
  const reader = source.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const chunk = await reader.read().catch((error: unknown) => {
        responded(undefined);
        throw error;
      });
      if (!chunk.done) return controller.enqueue(chunk.value as Uint8Array);
      controller.close();
      ended();
    },
    cancel(reason) {
      responded(undefined);
      return reader.cancel(reason);
    },
  });
  return new Response(body, response);
}

export interface HonoDashboardOptions extends DashboardHandlerOptions {
  /** The runtime's connection info helper, for `localOnly` (on unless a `token` is given). */
  getConnInfo?: GetConnInfo;
}

/**
 * The live dashboard (docs/dashboard.md) as a Hono handler, for the page's path and those under it.
 *
 *     const show = dashboard(recorder, { getConnInfo });
 *     app.get('/dashboard', show).get('/dashboard/*', show);
 */
export function dashboard(recorder: Dashboard, options: HonoDashboardOptions = {}): (c: Context) => Promise<Response> {
  const { getConnInfo, ...handlerOptions } = options;
  if (getConnInfo !== undefined && typeof getConnInfo !== 'function')
    throw new InvalidOptionError('getConnInfo', getConnInfo, "your runtime's getConnInfo, or none");
  const handle = dashboardHandler(recorder, handlerOptions);
  return async function sluiceDashboard(c) {
    const { status, headers, body } = await handle({
      method: c.req.method,
      url: c.req.url,
      authorization: c.req.header('Authorization'),
      remoteAddress: getConnInfo?.(c).remote.address,
    });
    return new Response(c.req.method === 'HEAD' ? null : body, { status, headers });
  };
}
