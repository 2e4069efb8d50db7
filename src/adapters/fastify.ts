import type { FastifyPluginCallback, FastifyRequest, onRequestHookHandler } from 'fastify';
import { clientAddressOf, createRateLimit, type Outcome, type RateLimitOptions, type RequestFacts } from './core.js';
import { incomingFacts } from './node.js';

export type { Denial, RateLimitOptions, SluiceWarning, SluiceWarningCode, StoreFailurePolicy } from './core.js';

export type FastifyRateLimitOptions = RateLimitOptions<FastifyRequest>;

/** The plugin's default key for this request's client: `key: (request) => request.user?.id ?? clientAddress(request)`. */
export const clientAddress = clientAddressOf((request: FastifyRequest) => incomingFacts(request.raw));

declare module 'fastify' {
  interface FastifyContextConfig {
    /** This route's limit: options merged over the plugin's (e.g. `{ limiter: loginLimiter }`), or false for none. */
    rateLimit?: FastifyRateLimitOptions | false;
  }
}

// Fastify passes its own register options on to the plugin with ours.
const REGISTER_OPTIONS = ['logLevel', 'logSerializers'];

function onRequest(decide: (req: FastifyRequest, facts: RequestFacts) => Promise<Outcome>): onRequestHookHandler {
  return async function sluiceRateLimit(request, reply) {
    const outcome = await decide(request, incomingFacts(request.raw));
    reply.headers(outcome.headers);
    if (outcome.pass) return;
    // A Buffer, so Fastify sends the content type as given instead of appending a charset to it.
    return reply.code(outcome.status).type(outcome.contentType).send(Buffer.from(outcome.body));
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
  let global: onRequestHookHandler | undefined;
  try {
    global = hasGlobalLimit ? onRequest(createRateLimit(options, REGISTER_OPTIONS)) : undefined;
  } catch (error) {
    // Fastify's loader does not catch what a plugin throws: handed to done(), it rejects register() and ready().
    done(error as Error);
    return;
  }
  // A route naming its own limiter (or policy) inherits every other option, never the plugin's limiter.
  const shared: FastifyRateLimitOptions = { ...options, limiter: undefined, policy: undefined, store: undefined, prefix: undefined };
  fastify.addHook('onRoute', (route) => {
    const own = route.config?.rateLimit;
    const base = own && (own.limiter !== undefined || own.policy !== undefined) ? shared : options;
    const hook = own === false ? undefined : own ? onRequest(createRateLimit({ ...base, ...own }, REGISTER_OPTIONS)) : global;
    if (hook === undefined) return;
    const existing = route.onRequest === undefined ? [] : Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest];
    route.onRequest = [hook, ...existing];
  });
  done();
};

// What fastify-plugin does: the hooks apply to the routes of the registering scope, not a child scope.
Object.assign(rateLimit, { [Symbol.for('skip-override')]: true });
