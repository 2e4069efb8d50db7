import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import {
  Catch,
  Controller,
  Get,
  Module,
  Post,
  UseFilters,
  UseGuards,
  type ArgumentsHost,
  type ExceptionFilter,
  type ModuleMetadata,
  type Type,
} from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host.js';
import type { Request, Response } from 'express';
import {
  clientAddress,
  RateLimit,
  RateLimitException,
  RateLimitGuard,
  RateLimitModule,
  SkipRateLimit,
  type NestRateLimitOptions,
} from '../../src/adapters/nestjs.js';
import { createLimiter, fixedWindow, InvalidOptionError, memoryStore, type Limiter } from '../../src/index.js';
import { decorate, get, serveNest, type RunningApp } from './apps.js';

// A clock that stands still 10 s into a minute: a 1-minute window resets in 50 s.
const store = memoryStore({ now: () => 1_800_000_010_000 });
let prefixes = 0;
const limiter = (limit: number, name: string): Limiter =>
  createLimiter({ store, prefix: `nest-${++prefixes}`, policy: fixedWindow({ limit, window: '1m', name }) });

/** A controller answering GET /<path> with its path, for each path; `decorators` by path, and for the class under ''. */
function controller(
  prefix: string,
  paths: readonly string[],
  decorators: Record<string, Array<ClassDecorator & MethodDecorator>> = {},
): Type {
  class Routes {}
  for (const path of paths) {
    Object.defineProperty(Routes.prototype, path, { value: () => path, writable: true, configurable: true });
    decorate(Routes, path, Get(path), ...(decorators[path] ?? []));
  }
  Controller(prefix)(Routes);
  for (const decorator of decorators[''] ?? []) decorator(Routes);
  return Routes;
}

const running: RunningApp[] = [];
after(() => Promise.all(running.map((app) => app.close())));

/** An app of these controllers, the module's options, and the guard bound app-wide (unless `guard: false`). */
async function serve(
  module: NestRateLimitOptions | DynamicImport,
  controllers: Type[],
  guard = true,
  configure?: Parameters<typeof serveNest>[1],
): Promise<RunningApp> {
  const metadata: ModuleMetadata = {
    imports: ['module' in module ? module : RateLimitModule.forRoot(module)],
    controllers,
    providers: guard ? [{ provide: APP_GUARD, useClass: RateLimitGuard }] : [],
  };
  const app = await serveNest(metadata, configure);
  running.push(app);
  return app;
}
type DynamicImport = ReturnType<typeof RateLimitModule.forRoot>;

async function replies(url: string, count: number): Promise<string[]> {
  const result: string[] = [];
  for (let i = 0; i < count; i++) {
    const reply = await get(url);
    result.push(`${reply.status} ${String(reply.headers.ratelimit ?? '-')}`);
  }
  return result;
}

describe('NestJS guard and decorators', () => {
  it("limits a route by its @RateLimit() options, merged over the module's: its own limiter, or the module's with its own status", async () => {
    const app = await serve({ limiter: limiter(1, 'site') }, [
      controller('', ['home', 'login', 'shed'], {
        login: [RateLimit({ limiter: limiter(2, 'login') })],
        shed: [RateLimit({ status: 503 })],
      }),
    ]);
    assert.deepEqual(await replies(`${app.url}/login`, 3), [
      '200 "login";r=1;t=50',
      '200 "login";r=0;t=50',
      '429 "login";r=0;t=50',
    ]);
    // /home and /shed share the module's limiter; /shed answers its denial with its own status.
    assert.deepEqual(
      [...(await replies(`${app.url}/home`, 1)), ...(await replies(`${app.url}/shed`, 1))],
      ['200 "site";r=0;t=50', '503 "site";r=0;t=50'],
    );
    const shed = await get(`${app.url}/shed`);
    assert.deepEqual(
      [shed.headers['content-type'], (JSON.parse(shed.body) as { type: unknown }).type],
      ['application/problem+json', 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity'],
    );
  });

  it("applies a controller's @RateLimit() to each of its routes, under a method's own options", async () => {
    const app = await serve({ limiter: limiter(5, 'site') }, [
      controller('', ['home']),
      controller('api', ['list', 'legacy'], {
        '': [RateLimit({ limiter: limiter(1, 'api') })],
        legacy: [RateLimit({ headers: 'draft-7' })],
      }),
    ]);
    assert.deepEqual(await replies(`${app.url}/api/list`, 2), ['200 "api";r=0;t=50', '429 "api";r=0;t=50']);
    // The controller's limiter, with the method's header mode.
    assert.deepEqual(await replies(`${app.url}/api/legacy`, 1), ['429 limit=1, remaining=0, reset=50']);
    assert.deepEqual(await replies(`${app.url}/home`, 1), ['200 "site";r=4;t=50']);
  });

  it('lets through what @SkipRateLimit() marks, uncounted and without headers; SkipRateLimit(false) on a method limits it again', async () => {
    const app = await serve({ limiter: limiter(1, 'site') }, [
      controller('', ['home', 'health'], { health: [SkipRateLimit()] }),
      controller('internal', ['metrics', 'admin'], {
        '': [SkipRateLimit()],
        admin: [SkipRateLimit(false), RateLimit({ limiter: limiter(1, 'admin') })],
      }),
    ]);
    assert.deepEqual(await replies(`${app.url}/health`, 3), ['200 -', '200 -', '200 -']);
    assert.deepEqual(await replies(`${app.url}/internal/metrics`, 3), ['200 -', '200 -', '200 -']);
    assert.deepEqual(await replies(`${app.url}/internal/admin`, 2), ['200 "admin";r=0;t=50', '429 "admin";r=0;t=50']);
    assert.deepEqual(await replies(`${app.url}/home`, 2), ['200 "site";r=0;t=50', '429 "site";r=0;t=50']);
  });

  it('limits only the controllers that bind the guard with @UseGuards()', async () => {
    const app = await serve(
      { limiter: limiter(1, 'guarded') },
      [controller('open', ['home']), controller('guarded', ['home'], { '': [UseGuards(RateLimitGuard)] })],
      false,
    );
    assert.deepEqual(await replies(`${app.url}/guarded/home`, 2), ['200 "guarded";r=0;t=50', '429 "guarded";r=0;t=50']);
    assert.deepEqual(await replies(`${app.url}/open/home`, 2), ['200 -', '200 -']);
  });

  it("takes its options from forRootAsync's factory, with what it injects", async () => {
    class ConfigModule {}
    Module({ providers: [{ provide: 'LIMITER', useValue: limiter(1, 'async') }], exports: ['LIMITER'] })(ConfigModule);
    const module = RateLimitModule.forRootAsync({
      imports: [ConfigModule],
      inject: ['LIMITER'],
      useFactory: (injected: Limiter) => Promise.resolve({ limiter: injected, status: 503 }),
    });
    const app = await serve(module, [controller('', ['home'])]);
    assert.deepEqual(await replies(`${app.url}/home`, 2), ['200 "async";r=0;t=50', '503 "async";r=0;t=50']);
  });

  it('throws a RateLimitException that a filter of your own may answer, the rate-limit fields already set', async () => {
    const denials: string[] = [];
    class TeapotFilter implements ExceptionFilter {
      catch(exception: RateLimitException, host: ArgumentsHost) {
        denials.push(
          `${exception.getStatus()} ${exception.denial.reason} ${exception.denial.violated.map((p) => p.name).join()} ${exception.contentType}`,
        );
        host.switchToHttp().getResponse<Response>().status(418).json({ retryInMs: exception.denial.retryAfterMs });
      }
    }
    Catch()(TeapotFilter);
    // Bound to the controller, or app-wide: Nest tries the app's own global filters before the module's.
    const onController = await serve({ limiter: limiter(1, 'tea') }, [
      controller('', ['home'], { '': [UseFilters(new TeapotFilter())] }),
    ]);
    const global = await serve({ limiter: limiter(1, 'tea') }, [controller('', ['home'])], true, (app) =>
      app.useGlobalFilters(new TeapotFilter()),
    );
    for (const app of [onController, global]) {
      await get(`${app.url}/home`);
      const denied = await get(`${app.url}/home`);
      assert.deepEqual(
        [denied.status, denied.headers['retry-after'], denied.headers.ratelimit, denied.body],
        [418, '50', '"tea";r=0;t=50', '{"retryInMs":50000}'],
      );
    }
    assert.deepEqual(denials, ['429 limited tea application/problem+json', '429 limited tea application/problem+json']);
  });

  it('decides after Nest has parsed the body and routed the request: a key may read req.body and req.route', async () => {
    class Login {
      login() {
        return 'welcome';
      }
    }
    Controller()(Login);
    decorate(
      Login,
      'login',
      Post('login'),
      RateLimit({ limiter: limiter(1, 'login'), key: (req) => `user:${(req.body as { user?: string }).user}` }),
    );
    // One quota per route and client, as @nestjs/throttler counts by default.
    const app = await serve(
      {
        limiter: limiter(1, 'per-route'),
        key: (req: Request) => `${(req.route as { path: string }).path}:${clientAddress(req)}`,
      },
      [controller('', ['home', 'about']), Login],
    );
    const post = async (user: string) =>
      (
        await fetch(`${app.url}/login`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ user }),
        })
      ).status;
    assert.deepEqual([await post('ada'), await post('ada'), await post('bob')], [201, 429, 201]);
    assert.deepEqual(
      [...(await replies(`${app.url}/home`, 2)), ...(await replies(`${app.url}/about`, 2))],
      ['200 "per-route";r=0;t=50', '429 "per-route";r=0;t=50', '200 "per-route";r=0;t=50', '429 "per-route";r=0;t=50'],
    );
  });

  it("lets any context but HTTP through, unlimited (a microservice's message, a gateway's event)", async () => {
    const counted: string[] = [];
    const site = limiter(1, 'contexts');
    const watched: Limiter = { ...site, limit: (key, options) => (counted.push(key), site.limit(key, options)) };
    const Routes = controller('', ['home']);
    class AppModule {}
    Module({ imports: [RateLimitModule.forRoot({ limiter: watched })], controllers: [Routes] })(AppModule);
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    try {
      await app.init();
      const guard = app.get(RateLimitGuard);
      const { home } = Routes.prototype as { home: () => string };
      for (const type of ['rpc', 'ws', 'graphql']) {
        const context = new ExecutionContextHost([{ pattern: 'home' }, {}], Routes, home);
        context.setType(type);
        assert.equal(await guard.canActivate(context), true, type);
      }
      assert.deepEqual(counted, []);
    } finally {
      await app.close();
    }
  });

  describe('refuses bad options with InvalidOptionError', () => {
    const refused = (option: string, mentioning?: string) => (error: unknown) =>
      error instanceof InvalidOptionError &&
      error.option === option &&
      (mentioning === undefined || error.message.includes(mentioning));

    it("in forRoot, at the call, naming the sluice option for @nestjs/throttler's", () => {
      const site = limiter(1, 'names');
      assert.throws(
        () => RateLimitModule.forRoot({ limiter: site, ttl: 60_000 } as NestRateLimitOptions),
        refused('ttl', 'use "policy"'),
      );
      assert.throws(
        () => RateLimitModule.forRoot({ throttlers: [{ ttl: 60_000, limit: 10 }] } as NestRateLimitOptions),
        refused('throttlers', 'use "policy": [fixedWindow('),
      );
      assert.throws(
        () => RateLimitModule.forRoot({ limiter: site, skipIf: () => true } as NestRateLimitOptions),
        refused('skipIf', 'use "skip"'),
      );
      assert.throws(
        () => RateLimitModule.forRoot({ limiter: site, getTracker: () => 'k' } as NestRateLimitOptions),
        refused('getTracker', 'use "key"'),
      );
      assert.throws(
        () => RateLimitModule.forRoot([{ ttl: 60_000, limit: 10 }] as NestRateLimitOptions),
        refused('RateLimitModule.forRoot'),
      );
    });

    it('in a decorator, where it is applied', () => {
      assert.throws(() => RateLimit({ limit: 5 } as NestRateLimitOptions), refused('limit', 'use "policy"'));
      assert.throws(() => SkipRateLimit('yes' as unknown as boolean), refused('SkipRateLimit'));
      assert.throws(() => RateLimitModule.forRootAsync({ useFactory: 'no' } as never), refused('useFactory'));
    });

    it('in the merged options of the module and a route, or from forRootAsync, rejecting app.listen() (the process goes on)', async () => {
      await assert.rejects(
        serve({ limiter: limiter(1, 'bad-route') }, [controller('', ['home'], { home: [RateLimit({ status: 302 })] })]),
        refused('status', 'got 302 (in the options of Routes.home)'),
      );
      await assert.rejects(
        serve({}, [controller('', ['home'], { home: [RateLimit({ policy: (req) => (req.path === '/' ? [] : []) })] })]),
        refused('limiter'),
      );
      // NestFactory.create aborts the process on a provider's error (abortOnError): the factory's options are checked at init, not in it.
      const module = RateLimitModule.forRootAsync({
        useFactory: () => ({ limiter: limiter(1, 'bad-async'), status: 302 }),
      });
      await assert.rejects(serve(module, [controller('', ['home'])]), refused('status'));
      const unknown = RateLimitModule.forRootAsync({
        useFactory: () => ({ limiter: limiter(1, 'bad-async'), limit: 5 }) as NestRateLimitOptions,
      });
      await assert.rejects(serve(unknown, [controller('', ['home'])]), refused('limit', 'use "policy"'));
    });
  });
});
