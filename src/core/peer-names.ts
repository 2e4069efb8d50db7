/**
 * What to use in sluice instead of another library's name for an option, or an older sluice's, by
 * that name: optionsObject (validate.ts) names it when such an option is refused.
 */
export type PeerNames = Readonly<Record<string, string>>;

const WINDOW = 'ms, or a string such as "1m"';

/** The peers' names (express-rate-limit, rate-limiter-flexible, @fastify/rate-limit) for a window policy's options. */
export const WINDOW_PEER_NAMES: PeerNames = {
  max: 'use "limit"',
  points: 'use "limit"',
  windowMs: `use "window" (${WINDOW})`,
  timeWindow: `use "window" (${WINDOW})`,
  duration: `use "window" (${WINDOW}; rate-limiter-flexible's duration is in seconds, sluice's numbers in ms)`,
};

const POLICY_INSTEAD = 'use "policy": a policy such as fixedWindow({ limit: 5, window: "1s" }), or an array of them';

/** rate-limiter-flexible's and express-rate-limit's names for what createLimiter takes otherwise. */
export const LIMITER_PEER_NAMES: PeerNames = {
  points: POLICY_INSTEAD,
  duration: POLICY_INSTEAD,
  limit: POLICY_INSTEAD,
  max: POLICY_INSTEAD,
  windowMs: POLICY_INSTEAD,
  policies: POLICY_INSTEAD,
  keyPrefix: 'use "prefix"',
  storeClient: 'use "store": redisStore(client)',
  blockDuration: 'use "penalty": { after: denials in a row, block: a duration }',
  insuranceLimiter: 'use "onStoreError": a fallback limiter',
  inMemoryBlockOnConsumed: 'use "deniedCache": { maxKeys }',
  // sluice's own names in 0.1.
  hooks:
    'use "onOutage": (failure) => ... and "onRecovery": (recovery) => ..., what hooks.storeError and hooks.recover were',
};

// Outages have one tracker, the limiter's failure guard: observe() counts what it reports.
const OUTAGES_INSTEAD =
  "store failures and recoveries are the limiter's to report: createLimiter({ ..., onOutage, onRecovery }); observe() counts them in sluice.store.errors";

/** observe()'s own names in 0.1. */
export const OBSERVE_OLD_NAMES: PeerNames = {
  onStoreError: `use the limiter's "onOutage": ${OUTAGES_INSTEAD}`,
  onRecover: `use the limiter's "onRecovery": ${OUTAGES_INSTEAD}`,
};

const MIDDLEWARE_POLICY_INSTEAD =
  'use "policy" (e.g. fixedWindow({ limit: 100, window: "15m" })) with "store", or a "limiter"';
const HEADERS_INSTEAD =
  'use "headers": "draft-11" (the default), "draft-8", "draft-7", "draft-6", "legacy", "openai" or false';
const BODY_INSTEAD = 'use "body": (req, denial) => what to send';
const SKIP_INSTEAD = 'use "skip": (req) => true lets a request through uncounted';
const ALLOW_INSTEAD =
  'failing open is the default; "onStoreError" chooses otherwise (beside "policy" and "store", or createLimiter\'s for a "limiter")';
const KEY_INSTEAD = 'use "key": (req) => the client\'s key (the adapter\'s clientAddress(req) gives the default one)';

/** What users of express-rate-limit, @fastify/rate-limit, hono-rate-limiter, koa-ratelimit and @nestjs/throttler would write, and sluice's option for it. */
export const MIDDLEWARE_PEER_NAMES: PeerNames = {
  keyGenerator: KEY_INSTEAD,
  getTracker: KEY_INSTEAD,
  generateKey:
    'use "key": (req) => the client\'s key, and "prefix" (or the limiter\'s) to keep one limiter\'s keys apart from another\'s',
  id: 'use "key": (req) => the client\'s key',
  max: MIDDLEWARE_POLICY_INSTEAD,
  limit: MIDDLEWARE_POLICY_INSTEAD,
  windowMs: MIDDLEWARE_POLICY_INSTEAD,
  timeWindow: MIDDLEWARE_POLICY_INSTEAD,
  duration: MIDDLEWARE_POLICY_INSTEAD,
  points: MIDDLEWARE_POLICY_INSTEAD,
  ttl: MIDDLEWARE_POLICY_INSTEAD,
  throttlers:
    'use "policy": [fixedWindow({ limit, window: ttl }), ...] (one policy per throttler, decided together) with "store", or a "limiter"',
  standardHeaders: HEADERS_INSTEAD,
  legacyHeaders: HEADERS_INSTEAD,
  addHeaders: HEADERS_INSTEAD,
  addHeadersOnExceeding: HEADERS_INSTEAD,
  enableDraftSpec: HEADERS_INSTEAD,
  disableHeader: HEADERS_INSTEAD,
  setHeaders: HEADERS_INSTEAD,
  message: BODY_INSTEAD,
  errorMessage: BODY_INSTEAD,
  errorResponseBuilder: BODY_INSTEAD,
  handler:
    'use "respond": (req, denial) => ({ status, headers, body }), or "body" for the body alone; "onDenied": (req, denial) => a side effect on each denial',
  statusCode: 'use "status"',
  allowList: SKIP_INSTEAD,
  allowlist: SKIP_INSTEAD,
  whitelist: SKIP_INSTEAD,
  skipIf: SKIP_INSTEAD,
  ignoreUserAgents:
    "use \"skip\": (req) => /bot/i.test(req.headers['user-agent'] ?? '') lets those requests through uncounted",
  skipOnError: ALLOW_INSTEAD,
  passOnStoreError: ALLOW_INSTEAD,
  redis: 'use "store": redisStore(client), with "policy"; or a "limiter"',
  storage: 'use "store": redisStore(client), with "policy"; or a "limiter"',
  keyPrefix: 'use "prefix"',
  trustProxy:
    'use "trustedProxies": the number of proxies in front of this server, or "framework" to defer to its own setting (Express, Fastify, Koa)',
  nameSpace: 'use "prefix"',
  identifier: 'name the policy: fixedWindow({ ..., name })',
  name: 'name the policy: fixedWindow({ ..., name })',
  ban: 'use the limiter\'s "penalty": createLimiter({ ..., penalty: { after, block } })',
  blockDuration: 'use the limiter\'s "penalty": createLimiter({ ..., penalty: { after: 1, block } })',
  validate: 'sluice checks every option when the middleware is built; there is nothing to turn off',
  requestPropertyName:
    "the decision is always at req.rateLimit (Express, node:http, NestJS), request.rateLimit (Fastify), c.get('rateLimit') (Hono), ctx.state.rateLimit (Koa)",
  requestWasSuccessful: 'a status below 400 is a success for skipSuccessfulRequests and skipFailedRequests',
  // sluice's own name in 0.1.
  onWarning:
    "sluice's warnings are process warnings, each with a code (docs/errors.md#warnings): process.on('warning', (warning) => ...)",
};
