import { SluiceError, StoreError, messageOf, type SluiceWarningCode } from '../core/errors.js';
import { warn } from '../core/host.js';
import type { CostByUnit, Decision, LimitOptions, Limiter, Reservation } from '../core/types.js';
import {
  addressKey,
  clientAddressConfig,
  findClientAddress,
  type AddressProblem,
  type ClientAddressConfig,
  type ClientAddressOptions,
} from '../http/client-address.js';
import { rateLimitHeaders, violated, type HeaderFields, type HeaderMode } from '../http/headers.js';
import { PROBLEM_CONTENT_TYPE, rateLimitProblem, storeUnavailableProblem } from '../http/problem.js';
import { bodyOf, denialResponse, type Denial, type DenialContent } from './denial.js';
import {
  middlewareSettings,
  type AdapterSpec,
  type MiddlewareSettings,
  type RateLimitOptions,
} from './middleware-options.js';

/**
 * What a handler learns of its request's rate limit (`req.rateLimit`, `request.rateLimit`,
 * `c.get('rateLimit')`, `ctx.state.rateLimit`): the limiter's decision and the client's key.
 * Set on every request the store counted; absent on one skipped or decided without the store.
 */
export interface RateLimitInfo extends Decision {
  readonly key: string;
}

/**
 * The decision with the client's key, `{ ...decision, key }`: a literal when it has the usual seven
 * fields (V8: a key added to a spread copy moves it to a new map; bench/NOTES.md).
 */
function rateLimitInfo(decision: Decision, key: string): RateLimitInfo {
  if (!hasUsualFields(decision)) return Object.assign({}, decision, { key });
  const { allowed, limit, remaining, resetAfterMs, retryAfterMs, policies, decidedAt } = decision;
  return { allowed, limit, remaining, resetAfterMs, retryAfterMs, policies, decidedAt, key };
}

const USUAL_FIELDS = ['allowed', 'limit', 'remaining', 'resetAfterMs', 'retryAfterMs', 'policies', 'decidedAt'];

/** Whether a decision has the seven fields every decision has, in their order, and no other. */
function hasUsualFields(decision: Decision): boolean {
  const fields = Object.keys(decision);
  if (fields.length !== USUAL_FIELDS.length) return false;
  for (let i = 0; i < fields.length; i++) if (fields[i] !== USUAL_FIELDS[i]) return false;
  return true;
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
  | (DenialContent & { readonly pass: false; readonly denial: Denial });

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

// A refund or cancel after the response rejects only when the store failed: the limiter's failure
// guard has reported that, and the response is gone, so nothing is left to do with it.
const reportedByLimiter = (): void => undefined;

/**
 * The framework-neutral middleware: validates the options once, then decides each request from
 * the framework's request object and its facts. Adapters only translate the outcome, and say in
 * `adapter` what they add (options of their own, their framework's proxy setting).
 */
export function createRateLimit<Req, Res = unknown>(
  options: RateLimitOptions<Req, Res>,
  adapter: AdapterSpec = {},
): (req: Req, facts: RequestFacts) => Promise<Outcome> {
  const middleware = new Middleware(options, adapter);
  return (req, facts) => middleware.decide(req, facts);
}

/** One middleware's checked options and hooks, and the warnings it has given. */
class Middleware<Req, Res> {
  private readonly limiter: Limiter;
  private readonly mode: HeaderMode;
  private readonly status: number;
  private readonly skipSuccessful: boolean;
  private readonly skipFailed: boolean;
  private readonly addresses: ClientAddressConfig;
  private readonly policyOf: MiddlewareSettings<Req>['policyOf'];
  private readonly hooks: Pick<
    RateLimitOptions<Req, Res>,
    'key' | 'cost' | 'skip' | 'onDenied' | 'body' | 'respond' | 'settle'
  >;
  private readonly warned = new Set<MiddlewareWarning>();

  constructor(options: RateLimitOptions<Req, Res>, adapter: AdapterSpec) {
    ({
      limiter: this.limiter,
      mode: this.mode,
      status: this.status,
      skipSuccessful: this.skipSuccessful,
      skipFailed: this.skipFailed,
      addresses: this.addresses,
      policyOf: this.policyOf,
    } = middlewareSettings(options, adapter));
    const { key, cost, skip, onDenied, body, respond, settle } = options;
    this.hooks = { key, cost, skip, onDenied, body, respond, settle };
  }

  private warnOnce(code: MiddlewareWarning, detail = ''): void {
    if (this.warned.has(code)) return;
    this.warned.add(code);
    warn(`sluice: ${WARNINGS[code]}${detail}`, { code });
  }

  private defaultKey(facts: RequestFacts): string {
    const { key, problem } = addressKeyOf(this.addresses, facts);
    if (problem === 'proxy-header-ignored') this.warnOnce('SLUICE_PROXY_HEADER_IGNORED');
    if (problem === 'proxy-chain-short') this.warnOnce('SLUICE_PROXY_CHAIN_SHORT');
    if (key === UNKNOWN_CLIENT) this.warnOnce('SLUICE_CLIENT_ADDRESS_UNKNOWN');
    return key;
  }

  /** The reservation settled at what `settle` says the request cost; a hook that throws or answers a bad cost is reported. */
  private settleAt(req: Req, response: unknown, reservation: Pick<Reservation, 'settle'>): void {
    let actual: Promise<number | CostByUnit>;
    try {
      actual = Promise.resolve(
        (this.hooks.settle as NonNullable<RateLimitOptions<Req, Res>['settle']>)(req, response as Res),
      );
    } catch (error) {
      actual = Promise.reject(error);
    }
    actual.then(
      (cost) =>
        reservation.settle(cost).catch((error: unknown) => {
          if (!isStoreFailure(error)) this.warnOnce('SLUICE_SETTLE_FAILED', ` ${messageOf(error)}`);
        }),
      (error: unknown) => this.warnOnce('SLUICE_SETTLE_FAILED', ` The settle hook threw: ${messageOf(error)}`),
    );
  }

  /**
   * What the adapter calls with the response's status, when the request's charge is corrected
   * after it: given back when its outcome is not counted, else settled at what it cost.
   */
  private afterResponse(
    req: Req,
    response: unknown,
    clientKey: string,
    requestCost: LimitOptions['cost'],
    policy: LimitOptions['policy'],
    decision: Decision,
    reservation?: Pick<Reservation, 'settle' | 'cancel'>,
  ): Responded | undefined {
    const { skipSuccessful, skipFailed, limiter } = this;
    if (!skipSuccessful && !skipFailed && !reservation) return undefined;
    return (status) => {
      const succeeded = status !== undefined && status < 400;
      const uncounted = succeeded ? skipSuccessful : skipFailed;
      if (reservation && uncounted) reservation.cancel().catch(reportedByLimiter);
      else if (reservation) this.settleAt(req, response, reservation);
      else if (uncounted) limiter.refund(clientKey, requestCost, { policy, decision }).catch(reportedByLimiter);
    };
  }

  private async deny(req: Req, denial: Denial, headers: HeaderFields, fallbackBody: unknown): Promise<Outcome> {
    const { onDenied, respond, body } = this.hooks;
    await onDenied?.(req, denial);
    if (respond) return { pass: false, denial, ...denialResponse(await respond(req, denial), denial.status, headers) };
    const content = body
      ? bodyOf(await body(req, denial))
      : { contentType: PROBLEM_CONTENT_TYPE, body: JSON.stringify(fallbackBody) };
    return { pass: false, denial, status: denial.status, headers, ...content };
  }

  async decide(req: Req, facts: RequestFacts): Promise<Outcome> {
    const { key, cost, skip, settle: settleHook } = this.hooks;
    const { limiter, policyOf } = this;
    if (skip && (await skip(req))) return { pass: true, headers: {} };
    const clientKey = key ? await key(req) : this.defaultKey(facts);
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
      return this.deny(req, denial, {}, storeUnavailableProblem);
    }
    const headers = rateLimitHeaders(decision, this.mode, undefined, clientKey);
    // A shadow denial was admitted without being counted: there is nothing to give back.
    if (decision.allowed) {
      const responded = decision.shadowDenied
        ? undefined
        : this.afterResponse(req, facts.response, clientKey, requestCost, policy, decision, reservation);
      return { pass: true, headers, responded, rateLimit: rateLimitInfo(decision, clientKey) };
    }
    const { status } = this;
    const denial: Denial = {
      reason: 'limited',
      status,
      key: clientKey,
      policies: decision.policies,
      violated: violated(decision),
      retryAfterMs: decision.retryAfterMs,
    };
    return this.deny(req, denial, headers, rateLimitProblem(status, denial.violated));
  }
}
