import { SluiceError, StoreError, InvalidOptionError, messageOf, type SluiceWarningCode } from '../core/errors.js';
import { warn } from '../core/host.js';
import type { StoreErrorPolicy } from '../limiter/failure.js';
import { createLimiter } from '../limiter/limiter.js';
import type {
  CostByUnit,
  Decision,
  LimitOptions,
  Limiter,
  Policy,
  PolicyDecision,
  Reservation,
} from '../core/types.js';
import { MIDDLEWARE_PEER_NAMES } from '../core/peer-names.js';
import { optionsObject } from '../core/validate.js';
import {
  addressKey,
  clientAddressConfig,
  findClientAddress,
  type AddressProblem,
  type ClientAddressConfig,
  type ClientAddressOptions,
} from '../http/client-address.js';
import {
  checkOpenAiUnits,
  rateLimitHeaders,
  validHeaderMode,
  violated,
  type HeaderFields,
  type HeaderMode,
} from '../http/headers.js';
import { PROBLEM_CONTENT_TYPE, rateLimitProblem, storeUnavailableProblem } from '../http/problem.js';
import type { Store } from '../engine/store.js';

/** Why a request was turned away. */
export interface Denial {
  /** 'limited': a policy's quota is spent. 'store-error': the store failed and the limiter's failure policy (`onStoreError`) denied. */
  readonly reason: 'limited' | 'store-error';
  /** The response's status: the `status` option's (429 by default), or 503 for a store error. */
  readonly status: number;
  /** The client's rate-limit key. */
  readonly key: string;
  /** Every policy with its decision; empty when the store failed. */
  readonly policies: readonly PolicyDecision[];
  /** The policies that denied the request. */
  readonly violated: readonly PolicyDecision[];
  /** Milliseconds until the request would be admitted (0 when the store failed: unknown). */
  readonly retryAfterMs: number;
  /** The store's failure, when `reason` is 'store-error'. */
  readonly error?: unknown;
}

type MaybePromise<T> = T | Promise<T>;

/**
 * What a handler learns of its request's rate limit (`req.rateLimit`, `request.rateLimit`,
 * `c.get('rateLimit')`, `ctx.state.rateLimit`): the limiter's decision and the client's key.
 * Set on every request the store counted; absent on one skipped or decided without the store.
 */
export interface RateLimitInfo extends Decision {
  readonly key: string;
}

/**
 * The decision with the client's key: `{ ...decision, key }`, built without that spread where the
 * decision has only the six fields every decision has (the usual case). V8 gives a spread copy a
 * map that the property added after it must leave, which cost about 1 µs a request behind an HTTP
 * server (docs/performance.md, "The middleware's own cost"); the literal costs a few dozen ns.
 */
function rateLimitInfo(decision: Decision, key: string): RateLimitInfo {
  if (!hasUsualFields(decision)) return Object.assign({}, decision, { key });
  const { allowed, limit, remaining, resetAfterMs, retryAfterMs, policies } = decision;
  return { allowed, limit, remaining, resetAfterMs, retryAfterMs, policies, key };
}

const USUAL_FIELDS = ['allowed', 'limit', 'remaining', 'resetAfterMs', 'retryAfterMs', 'policies'];

/** Whether a decision has the six fields every decision has, in their order, and no other. */
function hasUsualFields(decision: Decision): boolean {
  const fields = Object.keys(decision);
  if (fields.length !== USUAL_FIELDS.length) return false;
  for (let i = 0; i < fields.length; i++) if (fields[i] !== USUAL_FIELDS[i]) return false;
  return true;
}

/** What `respond` answers a denial with. */
export interface DenialResponse {
  /** From 400 to 599; default the denial's (the `status` option's, or 503 for a store error). */
  readonly status?: number;
  /** Sent besides (and over) the rate-limit fields and Retry-After; a `Content-Type` here is the body's. */
  readonly headers?: Readonly<Record<string, string>>;
  /** A string is sent as it is (text/plain unless `headers` say otherwise), anything else as JSON; none: an empty body. */
  readonly body?: unknown;
}

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

/** What an adapter knows about a request, in the same shape for every framework. */
export interface RequestFacts {
  /** A request header by its lower-case name; several lines joined with ', '. */
  header(name: string): string | undefined;
  /** The peer's address on the socket (undefined when the runtime does not tell). */
  readonly remoteAddress: string | undefined;
  /** The client's address by the framework's own proxy setting, where it has one (read only for `trustedProxies: 'framework'`). */
  readonly frameworkAddress?: string | undefined;
  /** The framework's response (or context), for the `settle` hook. */
  readonly response?: unknown;
}

/** What an adapter adds to the shared options. */
export interface AdapterSpec {
  /** Options of its own, not refused as unknown. */
  readonly options?: readonly string[];
  /** Its framework's own proxy setting (e.g. "Express's `trust proxy`"), if `trustedProxies: 'framework'` may defer to it through `RequestFacts.frameworkAddress`. */
  readonly proxySetting?: string;
}

/** Told the response's status once it is sent, or undefined when it was cut off first. */
export type Responded = (status: number | undefined) => void;

/**
 * The response an adapter must produce: let the request pass with these headers, or answer now.
 * A pass with `responded` wants to hear how the response ended, to refund the request if that
 * outcome is not counted.
 */
export type Outcome =
  | {
      readonly pass: true;
      readonly headers: HeaderFields;
      readonly responded?: Responded;
      readonly rateLimit?: RateLimitInfo;
    }
  | {
      readonly pass: false;
      readonly status: number;
      readonly headers: HeaderFields;
      readonly contentType: string;
      readonly body: string;
      readonly denial: Denial;
    };

/** A denial as it is sent. */
export type DenialOutcome = Extract<Outcome, { pass: false }>;

// Every client whose address is unknown shares this key: no one gets unlimited quota by hiding it.
const UNKNOWN_CLIENT = 'unknown-client';

/** The warnings a middleware gives, once each (docs/errors.md#warnings). */
type MiddlewareWarning = Extract<
  SluiceWarningCode,
  'SLUICE_PROXY_HEADER_IGNORED' | 'SLUICE_PROXY_CHAIN_SHORT' | 'SLUICE_CLIENT_ADDRESS_UNKNOWN' | 'SLUICE_SETTLE_FAILED'
>;

const WARNINGS: Record<MiddlewareWarning, string> = {
  SLUICE_PROXY_HEADER_IGNORED:
    'a request carries a proxy header but trustedProxies is 0, so clients are keyed by the socket address. Behind a proxy every client then shares one quota: set trustedProxies to the number of proxies in front of this server.',
  SLUICE_PROXY_CHAIN_SHORT:
    'a request passed through fewer proxies than trustedProxies declares: it bypassed a proxy, or trustedProxies is too high. Its key may be chosen by the client.',
  SLUICE_CLIENT_ADDRESS_UNKNOWN:
    "a request's client address is unknown, so it shares one quota with every such request. Pass `key`, or on Hono your runtime's `getConnInfo`.",
  SLUICE_SETTLE_FAILED:
    'the `settle` hook threw, or answered what is not a cost; those requests stay charged at their estimate (`cost`).',
};

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

/** A request's client as a rate-limit key (an IPv4 address, an IPv6 prefix, or UNKNOWN_CLIENT), and what was amiss in finding it. */
function addressKeyOf(config: ClientAddressConfig, facts: RequestFacts): { key: string; problem?: AddressProblem } {
  const deferred = config.trustedProxies === 'framework';
  const { address, problem } = findClientAddress(
    config,
    facts.remoteAddress,
    deferred ? undefined : facts.header(config.proxyHeader),
    deferred ? facts.frameworkAddress : undefined,
  );
  return { key: address === undefined ? UNKNOWN_CLIENT : addressKey(address, config.ipv6Subnet), problem };
}

/**
 * An adapter's `clientAddress(req, options?)`: the key the middleware gives a client by default
 * (its address, IPv6 grouped by `ipv6Subnet`, behind `trustedProxies`), for a `key` of your own,
 * e.g. `key: (req) => req.user?.id ?? clientAddress(req)`. Options as the middleware's; a bad one
 * throws InvalidOptionError.
 */
export function clientAddressOf<Req>(
  factsOf: (req: Req) => RequestFacts,
  proxySetting?: string,
): (req: Req, options?: ClientAddressOptions) => string {
  return (req, options = {}) => addressKeyOf(clientAddressConfig(options, proxySetting), factsOf(req)).key;
}

// A misuse of the limiter (a bad key or cost) is the program's bug and goes to the framework's
// error handling; anything else thrown while deciding is the store failing.
const isStoreFailure = (error: unknown): boolean => error instanceof StoreError || !(error instanceof SluiceError);

/** A denial's body as sent: nothing (which JSON cannot spell) is an empty text body, as a string is. */
function bodyOf(value: unknown): { contentType: string; body: string } {
  return typeof value === 'string' || value === undefined
    ? { contentType: 'text/plain; charset=utf-8', body: value ?? '' }
    : { contentType: 'application/json; charset=utf-8', body: JSON.stringify(value) };
}

/** An HTTP error status: a denial's. */
const isStatus = (value: unknown): value is number =>
  typeof value === 'number' && Number.isInteger(value) && value >= 400 && value <= 599;

type DenialContent = Omit<DenialOutcome, 'pass' | 'denial'>;

/** A denial as `respond` shaped it, over the rate-limit `headers`; what it returned is checked here, on the request. */
function denialResponse(response: DenialResponse, status: number, headers: HeaderFields): DenialContent {
  const valid =
    typeof response === 'object' &&
    response !== null &&
    (response.status === undefined || isStatus(response.status)) &&
    (response.headers === undefined ||
      (typeof response.headers === 'object' &&
        response.headers !== null &&
        Object.values(response.headers).every((v) => typeof v === 'string')));
  if (!valid)
    throw new InvalidOptionError(
      'respond',
      response,
      'a function returning { status?: 400 to 599, headers?: { name: string value }, body? }',
    );
  const own = Object.entries(response.headers ?? {});
  const contentType = own.find(([name]) => name.toLowerCase() === 'content-type')?.[1];
  const content = bodyOf(response.body);
  return {
    status: response.status ?? status,
    headers: { ...headers, ...Object.fromEntries(own.filter(([name]) => name.toLowerCase() !== 'content-type')) },
    contentType: contentType ?? content.contentType,
    body: content.body,
  };
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

/**
 * The framework-neutral middleware: validates the options once, then decides each request from
 * the framework's request object and its facts. Adapters only translate the outcome, and say in
 * `adapter` what they add (options of their own, their framework's proxy setting).
 */
export function createRateLimit<Req, Res = unknown>(
  options: RateLimitOptions<Req, Res>,
  adapter: AdapterSpec = {},
): (req: Req, facts: RequestFacts) => Promise<Outcome> {
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
  const { key, cost, skip, onDenied, body, respond, settle: settleHook } = options;
  const policyOf = typeof options.policy === 'function' ? options.policy : undefined;
  const warned = new Set<MiddlewareWarning>();
  const warnOnce = (code: MiddlewareWarning, detail = '') => {
    if (warned.has(code)) return;
    warned.add(code);
    warn(`sluice: ${WARNINGS[code]}${detail}`, { code });
  };

  function defaultKey(facts: RequestFacts): string {
    const { key, problem } = addressKeyOf(addresses, facts);
    if (problem === 'proxy-header-ignored') warnOnce('SLUICE_PROXY_HEADER_IGNORED');
    if (problem === 'proxy-chain-short') warnOnce('SLUICE_PROXY_CHAIN_SHORT');
    if (key === UNKNOWN_CLIENT) warnOnce('SLUICE_CLIENT_ADDRESS_UNKNOWN');
    return key;
  }

  // A refund or cancel after the response rejects only when the store failed: the limiter's failure
  // guard has reported that, and the response is gone, so nothing is left to do with it.
  const reportedByLimiter = (): void => undefined;

  /** The reservation settled at what `settle` says the request cost; a hook that throws or answers a bad cost is reported. */
  function settleAt(req: Req, response: unknown, reservation: Pick<Reservation, 'settle'>): void {
    let actual: Promise<number | CostByUnit>;
    try {
      actual = Promise.resolve((settleHook as NonNullable<typeof settleHook>)(req, response as Res));
    } catch (error) {
      actual = Promise.reject(error);
    }
    actual.then(
      (cost) =>
        reservation.settle(cost).catch((error: unknown) => {
          if (!isStoreFailure(error)) warnOnce('SLUICE_SETTLE_FAILED', ` ${messageOf(error)}`);
        }),
      (error: unknown) => warnOnce('SLUICE_SETTLE_FAILED', ` The settle hook threw: ${messageOf(error)}`),
    );
  }

  /**
   * What the adapter calls with the response's status, when the request's charge is corrected
   * after it: given back when its outcome is not counted, else settled at what it cost.
   */
  function afterResponse(
    req: Req,
    response: unknown,
    clientKey: string,
    requestCost: LimitOptions['cost'],
    policy: LimitOptions['policy'],
    decision: Decision,
    reservation?: Pick<Reservation, 'settle' | 'cancel'>,
  ): Responded | undefined {
    if (!skipSuccessful && !skipFailed && !reservation) return undefined;
    return (status) => {
      const succeeded = status !== undefined && status < 400;
      const uncounted = succeeded ? skipSuccessful : skipFailed;
      if (reservation && uncounted) reservation.cancel().catch(reportedByLimiter);
      else if (reservation) settleAt(req, response, reservation);
      else if (uncounted) limiter.refund(clientKey, requestCost, { policy, decision }).catch(reportedByLimiter);
    };
  }

  async function deny(req: Req, denial: Denial, headers: HeaderFields, fallbackBody: unknown): Promise<Outcome> {
    await onDenied?.(req, denial);
    if (respond) return { pass: false, denial, ...denialResponse(await respond(req, denial), denial.status, headers) };
    const content = body
      ? bodyOf(await body(req, denial))
      : { contentType: PROBLEM_CONTENT_TYPE, body: JSON.stringify(fallbackBody) };
    return { pass: false, denial, status: denial.status, headers, ...content };
  }

  return async function decide(req, facts) {
    if (skip && (await skip(req))) return { pass: true, headers: {} };
    const clientKey = key ? await key(req) : defaultKey(facts);
    const requestCost = cost ? await cost(req) : 1;
    const policy = policyOf ? await policyOf(req) : undefined;
    let decision: Decision | undefined;
    let reservation: Pick<Reservation, 'settle' | 'cancel'> | undefined;
    let failure: unknown;
    try {
      if (settleHook) {
        const { settle, cancel, ...made } = await limiter.reserve(clientKey, { cost: requestCost, policy });
        reservation = { settle, cancel };
        decision = made;
      } else {
        decision = await limiter.limit(clientKey, { cost: requestCost, policy });
      }
      failure = decision.error;
    } catch (error) {
      if (!isStoreFailure(error)) throw error;
      failure = error;
    }
    // Made without the store (by the limiter's onStoreError), or not at all (the call rejected): it
    // says nothing true of the client's quota, so it sends no rate-limit fields. The limiter has
    // reported the failure; the middleware only answers, admitting unless that policy denied.
    if (decision === undefined || decision.reason !== undefined) {
      if (decision?.allowed ?? true) return { pass: true, headers: {} };
      const denial: Denial = {
        reason: 'store-error',
        status: 503,
        key: clientKey,
        policies: [],
        violated: [],
        retryAfterMs: 0,
        error: failure,
      };
      return deny(req, denial, {}, storeUnavailableProblem);
    }
    const headers = rateLimitHeaders(decision, mode, undefined, clientKey);
    // A shadow denial was admitted without being counted: there is nothing to give back.
    if (decision.allowed) {
      const responded = decision.shadowDenied
        ? undefined
        : afterResponse(req, facts.response, clientKey, requestCost, policy, decision, reservation);
      return { pass: true, headers, responded, rateLimit: rateLimitInfo(decision, clientKey) };
    }
    const denial: Denial = {
      reason: 'limited',
      status,
      key: clientKey,
      policies: decision.policies,
      violated: violated(decision),
      retryAfterMs: decision.retryAfterMs,
    };
    return deny(req, denial, headers, rateLimitProblem(status, denial.violated));
  };
}
