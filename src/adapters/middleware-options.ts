import { InvalidOptionError } from '../core/errors.js';
import { MIDDLEWARE_PEER_NAMES } from '../core/peer-names.js';
import type { CostByUnit, Limiter, Policy } from '../core/types.js';
import { optionsObject } from '../core/validate.js';
import type { Store } from '../engine/store.js';
import { clientAddressConfig, type ClientAddressConfig, type ClientAddressOptions } from '../http/client-address.js';
import { checkOpenAiUnits, validHeaderMode, type HeaderMode } from '../http/headers.js';
import type { StoreErrorPolicy } from '../limiter/failure-options.js';
import { createLimiter } from '../limiter/limiter.js';
import { isStatus, type Denial, type DenialResponse } from './denial.js';

export type MaybePromise<T> = T | Promise<T>;

/**
 * Options shared by every adapter; `Req` is the framework's request (or context, for Hono and Koa),
 * `Res` its response (Express's, node:http's, Fastify's reply; the context again for Hono and Koa).
 */
export interface RateLimitOptions<Req, Res = unknown> extends ClientAddressOptions {
  /** The limiter deciding each request. Or give `policy` and `store` (and `prefix`) to build one. */
  limiter?: Limiter;
  /**
   * The policies to build a limiter with (beside `store`); or, as a function of the request with
   * `limiter`, the policies of this request (tiers), given to `limiter.limit(key, { policy })`.
   */
  policy?: Policy | readonly Policy[] | ((req: Req) => MaybePromise<Policy | readonly Policy[]>);
  store?: Store;
  prefix?: string;
  /** The client's key (default: its IP address, see trustedProxies and ipv6Subnet). */
  key?: (req: Req) => MaybePromise<string>;
  /** What this request uses (default 1): a number, or a cost by unit for policies that count other units ({ requests: 1, tokens: 4000 }). */
  cost?: (req: Req) => MaybePromise<number | CostByUnit>;
  /**
   * What an admitted request really cost, read once its response is over (a usage count the
   * handler left on the response, e.g. `res.locals.tokens`): the request is reserved at `cost`
   * (limiter.reserve) and settled at this. Cut off or failed responses are settled too, unless
   * skipFailedRequests gives them back whole.
   */
  settle?: (req: Req, res: Res) => MaybePromise<number | CostByUnit>;
  /** Return true to let a request through uncounted and without headers. */
  skip?: (req: Req) => MaybePromise<boolean>;
  /** Give back (limiter.refund) what an admitted request cost once its response succeeded (status below 400). */
  skipSuccessfulRequests?: boolean;
  /** Give back what an admitted request cost once its response failed (status 400 or above, or cut off before it ended). */
  skipFailedRequests?: boolean;
  /** Which rate-limit header fields to send (default 'draft-11'); Retry-After is always sent on a denial. */
  headers?: HeaderMode;
  /** The status of a denial: 429 (default), 503 for load shedding, or any other from 400 to 599. */
  status?: number;
  /** Called on every denial, before the response is sent (logging, metrics). */
  onDenied?: (req: Req, denial: Denial) => MaybePromise<void>;
  /** The body of a denial: a string is sent as text/plain, anything else as JSON. Default: an RFC 9457 problem. */
  body?: (req: Req, denial: Denial) => MaybePromise<unknown>;
  /** The whole response to a denial, in place of `body`: its status, headers (a Content-Type among them) and body. */
  respond?: (req: Req, denial: Denial) => MaybePromise<DenialResponse>;
  /**
   * The failure policy of the limiter built from `policy` and `store`: its `onStoreError` ('allow',
   * the default, 'deny', or a fallback limiter). A `limiter` given has its own. A request decided
   * without the store gets no rate-limit fields, and a denial is a 503 with reason 'store-error'.
   */
  onStoreError?: StoreErrorPolicy;
}

/** What an adapter adds to the shared options. */
export interface AdapterSpec {
  /** Options of its own, not refused as unknown. */
  readonly options?: readonly string[];
  /** Its framework's own proxy setting (e.g. "Express's `trust proxy`"), if `trustedProxies: 'framework'` may defer to it through `RequestFacts.frameworkAddress`. */
  readonly proxySetting?: string;
}

const OPTIONS = [
  'limiter',
  'policy',
  'store',
  'prefix',
  'key',
  'cost',
  'settle',
  'skip',
  'skipSuccessfulRequests',
  'skipFailedRequests',
  'headers',
  'status',
  'onDenied',
  'body',
  'respond',
  'onStoreError',
  'trustedProxies',
  'proxyHeader',
  'ipv6Subnet',
];

function optionalFunction(options: Record<string, unknown>, name: string): void {
  if (options[name] !== undefined && typeof options[name] !== 'function')
    throw new InvalidOptionError(name, options[name], 'a function');
}

function optionalBoolean(options: Record<string, unknown>, name: string): boolean {
  if (options[name] !== undefined && typeof options[name] !== 'boolean')
    throw new InvalidOptionError(name, options[name], 'true or false');
  return options[name] === true;
}

function limiterOf(o: Record<string, unknown>): Limiter {
  const perRequest = typeof o.policy === 'function';
  if (o.limiter !== undefined || perRequest || (o.policy === undefined && o.store === undefined)) {
    const limiter = o.limiter as Limiter;
    if (typeof limiter !== 'object' || limiter === null || typeof limiter.limit !== 'function') {
      const expected = perRequest
        ? 'a limiter from createLimiter(), whose store and prefix decide under the policies `policy(req)` returns'
        : 'a limiter from createLimiter(), or `policy` and `store` to build one';
      throw new InvalidOptionError('limiter', o.limiter, expected);
    }
    // Beside a limiter, they would be ignored: its own policies, store and failure policy decide.
    if (o.store !== undefined)
      throw new InvalidOptionError('store', o.store, 'left out when `limiter` is given (its store decides)');
    if (o.onStoreError !== undefined)
      throw new InvalidOptionError(
        'onStoreError',
        o.onStoreError,
        'left out when `limiter` is given (its own onStoreError decides: createLimiter({ ..., onStoreError }))',
      );
    if (o.policy !== undefined && !perRequest) {
      throw new InvalidOptionError(
        'policy',
        o.policy,
        "left out when `limiter` is given (its policies decide), or a function of the request choosing this request's policies",
      );
    }
    return countingLimiter(limiter, 'limiter');
  }
  return countingLimiter(
    createLimiter({
      policy: o.policy as Policy,
      store: o.store as Store,
      prefix: o.prefix as string | undefined,
      onStoreError: o.onStoreError as StoreErrorPolicy | undefined,
    }),
    'policy',
  );
}

/** A limiter's own policies; none for a custom limiter, which need not list them. */
const policiesOf = (limiter: Limiter): readonly Policy[] => (limiter as Partial<Limiter>).policies ?? [];

/**
 * `limiter`, refused when a policy of its own is a concurrency policy: the middleware counts each
 * request with limit(), which such a policy refuses on every call (it takes slots with acquire()).
 */
function countingLimiter(limiter: Limiter, option: 'limiter' | 'policy'): Limiter {
  const leasing = policiesOf(limiter).find((policy) => policy.algorithm === 'concurrency');
  if (leasing !== undefined) {
    throw new InvalidOptionError(
      option,
      leasing.name,
      'without a concurrency policy: the middleware counts each request with limit(), and a concurrency policy takes slots with acquire() and frees them with release() (take one in your handler instead)',
    );
  }
  return limiter;
}

/** The options object of a middleware (its name is `factory`): a plain object holding only the options it knows, or InvalidOptionError. */
export function rateLimitOptionsObject(
  factory: string,
  options: unknown,
  adapter: AdapterSpec = {},
): Record<string, unknown> {
  return optionsObject(factory, options, [...OPTIONS, ...(adapter.options ?? [])], MIDDLEWARE_PEER_NAMES);
}

/**
 * A route's own options over the app-wide ones. A route naming its own limiter (or policies to
 * build one) inherits every other option, never the app-wide limiter, policies, store or prefix;
 * one choosing its policies per request decides them with the app-wide limiter.
 */
export function routeOptions<Options extends RateLimitOptions<never, never>>(appWide: Options, own: Options): Options {
  const ownLimiter = own.limiter !== undefined || (own.policy !== undefined && typeof own.policy !== 'function');
  return ownLimiter
    ? { ...appWide, limiter: undefined, policy: undefined, store: undefined, prefix: undefined, ...own }
    : { ...appWide, ...own };
}

/** What createRateLimit reads from its options, checked once. */
export interface MiddlewareSettings<Req> {
  readonly limiter: Limiter;
  readonly mode: HeaderMode;
  readonly status: number;
  readonly skipSuccessful: boolean;
  readonly skipFailed: boolean;
  readonly addresses: ClientAddressConfig;
  /** `policy` when it is a function of the request. */
  readonly policyOf: ((req: Req) => MaybePromise<Policy | readonly Policy[]>) | undefined;
}

/** A middleware's options, checked: bad ones throw InvalidOptionError when it is built. */
export function middlewareSettings<Req, Res>(
  options: RateLimitOptions<Req, Res>,
  adapter: AdapterSpec,
): MiddlewareSettings<Req> {
  const o = rateLimitOptionsObject('rateLimit', options, adapter);
  const limiter = limiterOf(o);
  for (const name of ['key', 'cost', 'settle', 'skip', 'onDenied', 'body', 'respond']) optionalFunction(o, name);
  if (o.body !== undefined && o.respond !== undefined)
    throw new InvalidOptionError('body', o.body, 'left out when `respond` is given (it answers the whole denial)');
  const mode = validHeaderMode(o.headers);
  if (mode === 'openai') checkOpenAiUnits(policiesOf(limiter));
  const status = o.status ?? 429;
  if (!isStatus(status)) {
    throw new InvalidOptionError(
      'status',
      status,
      'an HTTP error status, a whole number from 400 to 599 (429 by default, 503 for load shedding)',
    );
  }
  const skipSuccessful = optionalBoolean(o, 'skipSuccessfulRequests');
  const skipFailed = optionalBoolean(o, 'skipFailedRequests');
  if ((skipSuccessful || skipFailed) && typeof limiter.refund !== 'function') {
    throw new InvalidOptionError(
      'limiter',
      limiter,
      'a limiter with refund(), to give back what skipSuccessfulRequests or skipFailedRequests do not count',
    );
  }
  if (o.settle !== undefined && typeof limiter.reserve !== 'function') {
    throw new InvalidOptionError(
      'limiter',
      limiter,
      'a limiter with reserve(), to take the estimate that `settle` corrects',
    );
  }
  const addresses = clientAddressConfig(options, adapter.proxySetting);
  const policyOf = typeof options.policy === 'function' ? options.policy : undefined;
  return { limiter, mode, status, skipSuccessful, skipFailed, addresses, policyOf };
}
