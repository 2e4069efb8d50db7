import type { FastifyPluginCallback, FastifyReply, FastifyRequest } from 'fastify';
import { InvalidOptionError } from '../core/errors.js';
import { dashboardHandler, type DashboardHandlerOptions } from '../dashboard/handler.js';
import type { Dashboard } from '../dashboard/recorder.js';
import { clientAddressOf, createRateLimit, type RateLimitInfo } from './middleware.js';
import { routeOptions, type RateLimitOptions } from './middleware-options.js';
import { incomingFacts, onResponseEnd } from './node-http.js';

export type { RateLimitInfo } from './middleware.js';
export type { RateLimitOptions } from './middleware-options.js';
export type { Denial, DenialResponse } from './denial.js';

/** The route hook that decides: 'onRequest' (the default, before the body is read) or 'preHandler' (after it is parsed, to key on it). */
export type FastifyRateLimitHook = 'onRequest' | 'preHandler';

export interface FastifyRateLimitOptions extends RateLimitOptions<FastifyRequest, FastifyReply> {
  /** When to decide: 'onRequest' (default), or 'preHandler' to key on the parsed body, e.g. a login's username. */
  hook?: FastifyRateLimitHook;
}

const fastifyAddress = (request: FastifyRequest) => request.ip;
const fastifyFacts = (request: FastifyRequest, reply?: FastifyReply) =>
  incomingFacts(request.raw, reply, request, fastifyAddress);
const PROXY_SETTING = "Fastify's `trustProxy` (request.ip)";

/** The plugin's default key for this request's client: `key: (request) => request.user?.id ?? clientAddress(request)`. */
export const clientAddress = clientAddressOf(fastifyFacts, PROXY_SETTING);

declare module 'fastify' {
  interface FastifyRequest {
    /** This request's rate limit, set by the plugin's hook: see RateLimitInfo. */
    rateLimit?: RateLimitInfo;
  }
  interface FastifyContextConfig {
    /** This route's limit: options merged over the plugin's (e.g. `{ limiter: loginLimiter }`), or false for none. */
    rateLimit?: FastifyRateLimitOptions | false;
  }
}

// Ours, and Fastify's own register options, which it passes on to the plugin with ours.
const ADAPTER_OPTIONS = ['hook', 'logLevel', 'logSerializers'];

type Hook = (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

/** The options' hook and its handler; a bad option throws InvalidOptionError. */
function limitHook(options: FastifyRateLimitOptions): { name: FastifyRateLimitHook; handler: Hook } {
  const decide = createRateLimit(options, { options: ADAPTER_OPTIONS, proxySetting: PROXY_SETTING });
  const { hook: name = 'onRequest' } = options;
  if (name !== 'onRequest' && name !== 'preHandler') {
    throw new InvalidOptionError(
      'hook',
      name,
      '"onRequest" (the default) or "preHandler" (after the body is parsed, to key on it)',
    );
  }
  return {
    name,
    async handler(request, reply) {
      const outcome = await decide(request, fastifyFacts(request, reply));
      reply.headers(outcome.headers);
      if (outcome.pass) {
        request.rateLimit = outcome.rateLimit;
        onResponseEnd(reply.raw, outcome.responded);
        return;
      }
      // A Buffer, so Fastify sends the content type as given instead of appending a charset to it.
      return reply.code(outcome.status).type(outcome.contentType).send(Buffer.from(outcome.body));
    },
  };
}

/**
 * A Fastify plugin: every route registered after it is limited by the plugin's options, unless its
 * `config.rateLimit` gives its own options (merged over the plugin's) or `false`. Without a
 * `limiter` (or `policy`) in the plugin's options, only routes with their own options are limited.
 * A bad plugin option rejects `register` with InvalidOptionError; a route's, its registration.
 *
 *     await app.register(rateLimit, { limiter });
 */
export const rateLimit: FastifyPluginCallback<FastifyRateLimitOptions> = function sluicePlugin(fastify, options, done) {
  const hasGlobalLimit = options.limiter !== undefined || options.policy !== undefined;
  let global: ReturnType<typeof limitHook> | undefined;
  try {
    global = hasGlobalLimit ? limitHook(options) : undefined;
  } catch (error) {
    // Fastify's loader does not catch what a plugin throws: handed to done(), it rejects register() and ready().
    done(error as Error);
    return;
  }
  // Declared, so every request has the property from the start (Fastify keeps one object shape).
  if (!fastify.hasRequestDecorator('rateLimit')) fastify.decorateRequest('rateLimit', undefined);
  fastify.addHook('onRoute', (route) => {
    const own = route.config?.rateLimit;
    const hook = own === false ? undefined : own ? limitHook(routeOptions(options, own)) : global;
    if (hook === undefined) return;
    const existing: unknown = route[hook.name];
    route[hook.name] = [
      hook.handler,
      ...(existing === undefined ? [] : Array.isArray(existing) ? (existing as unknown[]) : [existing]),
    ] as never;
  });
  done();
};

// What fastify-plugin does: the hooks apply to the routes of the registering scope, not a child scope.
Object.assign(rateLimit, { [Symbol.for('skip-override')]: true });

export interface FastifyDashboardOptions extends DashboardHandlerOptions {
  /** The recorder from createDashboard(). */
  dashboard: Dashboard;
}

/**
 * The live dashboard (docs/dashboard.md) as a Fastify plugin: the page at the plugin's prefix,
 * its data under it. The client's address for `localOnly` is the socket's, whatever `trustProxy` says.
 *
 *     await app.register(dashboard, { prefix: '/dashboard', dashboard: recorder, token });
 */
export const dashboard: FastifyPluginCallback<FastifyDashboardOptions> = function sluiceDashboard(
  fastify,
  options,
  done,
) {
  let handle;
  try {
    const { dashboard: recorder, token, localOnly } = options;
    handle = dashboardHandler(recorder, {
      ...(token === undefined ? {} : { token }),
      ...(localOnly === undefined ? {} : { localOnly }),
    });
  } catch (error) {
    done(error as Error);
    return;
  }
  const answer = async (request: FastifyRequest, reply: FastifyReply) => {
    const { status, headers, body } = await handle({
      method: request.method,
      url: request.url,
      authorization: request.headers.authorization,
      remoteAddress: request.raw.socket.remoteAddress,
    });
    return reply.code(status).headers(headers).send(body);
  };
  for (const path of ['/', '/data', '/key']) fastify.get(path, answer);
  done();
};
