import type { Request, Response } from 'express';
import {
  Catch,
  HttpException,
  Inject,
  Injectable,
  SetMetadata,
  type ArgumentsHost,
  type CanActivate,
  type CustomDecorator,
  type DynamicModule,
  type ExceptionFilter,
  type ExecutionContext,
  type FactoryProvider,
  type ModuleMetadata,
  type Provider,
} from '@nestjs/common';
import { APP_FILTER, DiscoveryModule, DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { InvalidOptionError } from '../core/errors.js';
import { optionsObject } from '../core/validate.js';
import type { ClientAddressOptions } from '../http/client-address.js';
import type { HeaderFields } from '../http/headers.js';
import { clientAddressOf, createRateLimit, type DenialOutcome, type Outcome, type RequestFacts } from './middleware.js';
import { rateLimitOptionsObject, routeOptions, type RateLimitOptions } from './middleware-options.js';
import { type Denial } from './denial.js';
import { applyOutcome, incomingFacts, onResponseEnd, setHeaders } from './node-http.js';

export type { RateLimitInfo } from './middleware.js';
export type { RateLimitOptions } from './middleware-options.js';
export type { Denial, DenialResponse } from './denial.js';

/** The options of the module and of `@RateLimit()`; callbacks receive the Express request (and `settle` the response: Nest on platform-express). */
export type NestRateLimitOptions = RateLimitOptions<Request, Response>;

const nestAddress = (req: Request) => req.ip;
const nestFacts = (req: Request, res?: Response) => incomingFacts(req, res, req, nestAddress);
const NEST = { proxySetting: "Express's `trust proxy` (app.set('trust proxy', ...) on Nest's Express app; req.ip)" };

/** The guard's default key for this request's client: `key: (req) => req.user?.id ?? clientAddress(req)`. */
export const clientAddress: (req: Request, options?: ClientAddressOptions) => string = clientAddressOf(
  nestFacts,
  NEST.proxySetting,
);

// Metadata keys of the decorators, read through Nest's Reflector.
const ROUTE_OPTIONS = 'sluice:rate-limit';
const SKIP = 'sluice:skip-rate-limit';
// The module's options, as given to forRoot or made by forRootAsync's factory.
const MODULE_OPTIONS = 'sluice:rate-limit-module-options';

/**
 * This route's (on a method) or these routes' (on a controller) own options, merged over the
 * module's: a controller's first, then a method's. Options naming their own `limiter` (or `policy`
 * and `store`) inherit none of the module's limiter, policy, store or prefix; every other option
 * is inherited. Option names are checked here; the merged options when the app initializes.
 *
 *     @RateLimit({ limiter: loginLimiter })
 */
export function RateLimit(options: NestRateLimitOptions): CustomDecorator<string> {
  rateLimitOptionsObject('RateLimit', options);
  return SetMetadata(ROUTE_OPTIONS, options);
}

/** No rate limit on this route (on a method) or on these routes (on a controller); `SkipRateLimit(false)` on a method limits it again. */
export function SkipRateLimit(skip = true): CustomDecorator<string> {
  if (typeof skip !== 'boolean') throw new InvalidOptionError('SkipRateLimit', skip, 'true (the default) or false');
  return SetMetadata(SKIP, skip);
}

type Decide = (req: Request, facts: RequestFacts) => Promise<Outcome>;
/** A controller class or a method of one: where the decorators put their metadata. */
type Target = Parameters<Reflector['get']>[1];

/**
 * The decider of every route, under the module's options and its decorators' own: built for every
 * controller's methods when the app initializes, so a bad option rejects `app.init()` (and
 * `app.listen()`) with InvalidOptionError instead of failing requests. The guard's dependency;
 * you need not use it yourself.
 */
export class RateLimitRoutes {
  // Routes without options of their own share one decider: one limiter, one set of warnings.
  private moduleDecider: Decide | undefined;
  private readonly deciders = new Map<Target, Map<Target, Decide | undefined>>();

  constructor(
    private readonly options: NestRateLimitOptions,
    private readonly reflector: Reflector,
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
  ) {}

  onModuleInit(): void {
    // Here, not in forRootAsync's factory: Nest aborts the process on a provider's error by default.
    rateLimitOptionsObject('RateLimitModule', this.options);
    this.moduleDecider = hasLimit(this.options) ? createRateLimit(this.options, NEST) : undefined;
    for (const { metatype } of this.discovery.getControllers()) {
      if (typeof metatype !== 'function') continue;
      const prototype = metatype.prototype as Record<string, Target>;
      for (const name of this.scanner.getAllMethodNames(prototype)) {
        try {
          this.deciderFor(metatype, prototype[name] as Target);
        } catch (error) {
          // Which route's options: the stack shows only Nest's start-up.
          if (error instanceof InvalidOptionError) error.message += ` (in the options of ${metatype.name}.${name})`;
          throw error;
        }
      }
    }
  }

  /** The decider of a controller's method, or undefined when it is not limited. */
  deciderFor(controller: Target, handler: Target): Decide | undefined {
    let ofController = this.deciders.get(controller);
    if (ofController === undefined)
      this.deciders.set(controller, (ofController = new Map<Target, Decide | undefined>()));
    if (!ofController.has(handler)) ofController.set(handler, this.build(controller, handler));
    return ofController.get(handler);
  }

  private build(controller: Target, handler: Target): Decide | undefined {
    if (this.reflector.getAllAndOverride<boolean | undefined>(SKIP, [handler, controller])) return undefined;
    const own = [controller, handler].flatMap(
      (target) => this.reflector.get<NestRateLimitOptions | undefined>(ROUTE_OPTIONS, target) ?? [],
    );
    if (own.length === 0) return this.moduleDecider;
    const options = own.reduce(routeOptions, this.options);
    return hasLimit(options) ? createRateLimit(options, NEST) : undefined;
  }
}

const hasLimit = (options: NestRateLimitOptions) => options.limiter !== undefined || options.policy !== undefined;

/**
 * A denial, thrown by the guard once the response carries its rate-limit fields and Retry-After.
 * The module's RateLimitExceptionFilter sends it as the other adapters do (status, problem+json or
 * what `body`/`respond` made); a filter of your own that catches it first may shape it otherwise.
 * `getResponse()` is the body sluice sends, `getStatus()` its status.
 */
export class RateLimitException extends HttpException {
  /** Why the request was turned away. */
  readonly denial: Denial;
  /** The rate-limit fields, Retry-After and those `respond` added. */
  readonly headers: HeaderFields;
  /** The body's content type. */
  readonly contentType: string;

  constructor(denied: DenialOutcome) {
    super(denied.body, denied.status);
    this.denial = denied.denial;
    this.headers = denied.headers;
    this.contentType = denied.contentType;
  }
}

/** Sends a RateLimitException as sluice's other adapters send a denial; the module registers it (APP_FILTER). */
export class RateLimitExceptionFilter implements ExceptionFilter<RateLimitException> {
  catch(exception: RateLimitException, host: ArgumentsHost): void {
    const { headers, contentType, denial } = exception;
    applyOutcome(host.switchToHttp().getResponse<Response>(), {
      pass: false,
      status: exception.getStatus(),
      headers,
      contentType,
      body: exception.getResponse() as string,
      denial,
    });
  }
}
Catch(RateLimitException)(RateLimitExceptionFilter);

/**
 * Limits HTTP requests (other contexts, such as WebSockets or microservices, pass) by the module's
 * options and the route's decorators. Bind it as any guard: for the whole app with
 * `{ provide: APP_GUARD, useClass: RateLimitGuard }`, or `@UseGuards(RateLimitGuard)`.
 * An admitted request's decision is at `req.rateLimit`.
 */
export class RateLimitGuard implements CanActivate {
  constructor(private readonly routes: RateLimitRoutes) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (context.getType() !== 'http') return true;
    const decide = this.routes.deciderFor(context.getClass(), context.getHandler());
    if (decide === undefined) return true;
    const http = context.switchToHttp();
    const req = http.getRequest<Request>();
    const res = http.getResponse<Response>();
    const outcome = await decide(req, nestFacts(req, res));
    // Set now, so that they are sent whichever filter answers a denial.
    setHeaders(res, outcome.headers);
    if (!outcome.pass) throw new RateLimitException(outcome);
    req.rateLimit = outcome.rateLimit;
    onResponseEnd(res, outcome.responded);
    return true;
  }
}
Injectable()(RateLimitGuard);
Inject(RateLimitRoutes)(RateLimitGuard, undefined, 0);

/** forRootAsync's options: the module's options made by `useFactory` from what `inject` names. */
export interface RateLimitModuleAsyncOptions
  extends Pick<FactoryProvider<NestRateLimitOptions>, 'useFactory' | 'inject'>, Pick<ModuleMetadata, 'imports'> {}

/**
 * Provides the guard (global: every module can bind it), its routes' deciders and the filter
 * answering denials. Import it once, in the root module.
 *
 *     RateLimitModule.forRoot({ limiter })
 */
export class RateLimitModule {
  static forRoot(options: NestRateLimitOptions): DynamicModule {
    rateLimitOptionsObject('RateLimitModule.forRoot', options);
    return rateLimitModule({ provide: MODULE_OPTIONS, useValue: options });
  }

  /** The options made by a factory, e.g. from a ConfigService: `forRootAsync({ imports, inject, useFactory })`. */
  static forRootAsync(options: RateLimitModuleAsyncOptions): DynamicModule {
    const {
      imports = [],
      inject = [],
      useFactory,
    } = optionsObject('RateLimitModule.forRootAsync', options, [
      'imports',
      'inject',
      'useFactory',
    ]) as Partial<RateLimitModuleAsyncOptions>;
    if (typeof useFactory !== 'function')
      throw new InvalidOptionError(
        'useFactory',
        useFactory,
        "a function returning the module's options (or a promise of them)",
      );
    return rateLimitModule({ provide: MODULE_OPTIONS, useFactory, inject }, imports);
  }
}

function rateLimitModule(options: Provider, imports: NonNullable<ModuleMetadata['imports']> = []): DynamicModule {
  return {
    module: RateLimitModule,
    global: true,
    imports: [...imports, DiscoveryModule],
    providers: [
      options,
      {
        provide: RateLimitRoutes,
        useFactory: (...deps: ConstructorParameters<typeof RateLimitRoutes>) => new RateLimitRoutes(...deps),
        inject: [MODULE_OPTIONS, Reflector, DiscoveryService, MetadataScanner],
      },
      RateLimitGuard,
      { provide: APP_FILTER, useClass: RateLimitExceptionFilter },
    ],
    exports: [RateLimitRoutes, RateLimitGuard],
  };
}
