import { PassThrough } from 'node:stream';
import { createServer, request, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getRequestListener, type HttpBindings } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import Router from '@koa/router';
import { Controller, Get, HttpCode, Module, Req, Res, type ModuleMetadata, type Type } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import express5 from 'express';
import express4 from 'express4';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import type { Request, Response } from 'express';
import type { FastifyRequest } from 'fastify';
import type { Context } from 'hono';
import type { RateLimitInfo } from '../../src/adapters/middleware.js';
import type { RateLimitOptions } from '../../src/adapters/middleware-options.js';
import { clientAddress as expressClientAddress, rateLimit as expressRateLimit } from '../../src/adapters/express.js';
import { clientAddress as fastifyClientAddress, rateLimit as fastifyRateLimit } from '../../src/adapters/fastify.js';
import { clientAddress as honoClientAddress, rateLimit as honoRateLimit } from '../../src/adapters/hono.js';
import { clientAddress as koaClientAddress, rateLimit as koaRateLimit } from '../../src/adapters/koa.js';
import {
  clientAddress as nestClientAddress,
  RateLimit,
  RateLimitGuard,
  RateLimitModule,
} from '../../src/adapters/nestjs.js';
import { clientAddress as nodeClientAddress, rateLimit as nodeRateLimit } from '../../src/adapters/node.js';
import type { ClientAddressOptions } from '../../src/http/client-address.js';

/**
 * The app every adapter serves in the behavioural suite:
 * - GET /       'home', limited by `global`;
 * - GET /health 'ok', limited by `global` unless `skipPath` names it;
 * - GET /fail   400 'bad', limited by `global`;
 * - GET /info   what the framework's place for it holds of the request's rate limit (InfoBody), limited by `global`;
 * - GET /cut    200 and a first chunk, 'partial', then nothing until the client gives up (see `cut`), limited by `global`;
 * - GET /login  'login', limited only by its own `login` options (when given).
 */
export interface AppSpec {
  readonly global: RateLimitOptions<unknown>;
  readonly login?: RateLimitOptions<unknown>;
  readonly skipPath?: string;
  /** Turn on the framework's own proxy setting, trusting one proxy, where it has one. */
  readonly frameworkProxy?: boolean;
}

/** What /info answers: the handler's view of its request's rate limit, or null when it has none. */
export type InfoBody = { key: string; allowed: boolean; remaining: number; policies: string[] } | null;

const infoOf = (info: RateLimitInfo | undefined): InfoBody =>
  info
    ? { key: info.key, allowed: info.allowed, remaining: info.remaining, policies: info.policies.map((p) => p.name) }
    : null;

export interface RunningApp {
  readonly url: string;
  close(): Promise<void>;
}

export interface Adapter {
  readonly name: string;
  serve(spec: AppSpec): Promise<RunningApp>;
  /** The adapter's exported clientAddress, on what its callbacks receive. */
  clientAddress(req: unknown, options?: ClientAddressOptions): string;
  /** Whether the framework has a proxy setting of its own (`trustedProxies: 'framework'`). */
  readonly proxySetting: boolean;
  /** A request header, from what its callbacks receive. */
  header(req: unknown, name: string): string | undefined;
  /** The node:http request under what its callbacks receive. */
  incoming(req: unknown): IncomingMessage;
}

const PARTIAL = 'partial';

/** A body stream that sends its first chunk and then waits forever. */
function unending(): PassThrough {
  const stream = new PassThrough();
  stream.write(PARTIAL);
  return stream;
}

/**
 * Serves `handle` on a free port. The frameworks' handlers answer their own errors, and a promise one
 * returns never rejects; if one did, the response is cut off, so that its test fails with the error logged.
 */
function listen(handle: (req: IncomingMessage, res: ServerResponse) => void | Promise<unknown>): Promise<RunningApp> {
  const server = createServer((req, res) => {
    Promise.resolve(handle(req, res)).catch((error: unknown) => {
      console.error(error);
      res.destroy();
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}`,
        close: () => new Promise<void>((done, fail) => server.close((error) => (error ? fail(error) : done()))),
      });
    });
  });
}

/** Global options with the spec's skip, given how this framework spells a request's path. */
function globalOptions<Req>(spec: AppSpec, path: (req: Req) => string): RateLimitOptions<Req> {
  const { skipPath } = spec;
  return skipPath === undefined ? spec.global : { ...spec.global, skip: (req) => path(req) === skipPath };
}

function expressAdapter(name: string, express: typeof express5): Adapter {
  return {
    name,
    clientAddress: (req, options) => expressClientAddress(req as Request, options),
    header: (req, name) => (req as Request).get(name),
    incoming: (req) => req as Request,
    proxySetting: true,
    serve(spec) {
      const app = express();
      if (spec.frameworkProxy) app.set('trust proxy', 1);
      if (spec.login) app.get('/login', expressRateLimit(spec.login), (_req, res) => void res.send('login'));
      app.use(
        expressRateLimit(globalOptions(spec, (req: IncomingMessage) => new URL(req.url ?? '/', 'http://x').pathname)),
      );
      app.get('/', (_req, res) => void res.send('home'));
      app.get('/health', (_req, res) => void res.send('ok'));
      app.get('/fail', (_req, res) => void res.status(400).send('bad'));
      app.get('/info', (req, res) => void res.json(infoOf(req.rateLimit)));
      app.get('/cut', (_req, res) => void res.write(PARTIAL));
      return listen(app);
    },
  };
}

const nodeAdapter: Adapter = {
  name: 'node:http',
  clientAddress: (req, options) => nodeClientAddress(req as IncomingMessage, options),
  header: (req, name) => (req as IncomingMessage).headers[name] as string | undefined,
  incoming: (req) => req as IncomingMessage,
  proxySetting: false,
  serve(spec) {
    const global = nodeRateLimit(
      globalOptions(spec, (req: IncomingMessage) => new URL(req.url ?? '/', 'http://x').pathname),
    );
    const login = spec.login ? nodeRateLimit(spec.login) : undefined;
    return listen(async (req: IncomingMessage, res: ServerResponse) => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      if (path === '/login' && login) {
        if (await login(req, res)) res.end('login');
        return;
      }
      if (!(await global(req, res))) return;
      if (path === '/info') return void res.end(JSON.stringify(infoOf(req.rateLimit)));
      if (path === '/cut') return void res.write(PARTIAL);
      if (path === '/fail') res.statusCode = 400;
      res.end(path === '/health' ? 'ok' : path === '/fail' ? 'bad' : 'home');
    });
  },
};

const fastifyAdapter: Adapter = {
  name: 'fastify',
  clientAddress: (req, options) => fastifyClientAddress(req as FastifyRequest, options),
  header: (req, name) => (req as FastifyRequest).headers[name] as string | undefined,
  incoming: (req) => (req as FastifyRequest).raw,
  proxySetting: true,
  async serve(spec) {
    // Fastify 5.12 ignores a hop count (it cannot tell the peer is a proxy): trust the loopback proxy by address.
    const app = Fastify({ trustProxy: spec.frameworkProxy ? '127.0.0.1' : false });
    await app.register(
      fastifyRateLimit,
      globalOptions(spec, (req) => req.routeOptions.url ?? req.url),
    );
    app.get('/', () => 'home');
    app.get('/health', () => 'ok');
    app.get('/fail', async (_request, reply) => reply.code(400).send('bad'));
    app.get('/info', (request) => infoOf(request.rateLimit));
    app.get('/cut', async (_request, reply) => reply.send(unending()));
    if (spec.login) app.get('/login', { config: { rateLimit: spec.login } }, () => 'login');
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    return { url, close: () => app.close() };
  },
};

const honoAdapter: Adapter = {
  name: 'hono',
  clientAddress: (c, options) => honoClientAddress(c as Context, { getConnInfo, ...options }),
  header: (c, name) => (c as Context).req.header(name),
  incoming: (c) => (c as Context<{ Bindings: HttpBindings }>).env.incoming,
  proxySetting: false,
  serve(spec) {
    const app = new Hono();
    if (spec.login) app.get('/login', honoRateLimit({ getConnInfo, ...spec.login }), (c) => c.text('login'));
    app.use(honoRateLimit({ getConnInfo, ...globalOptions(spec, (c) => c.req.path) }));
    // A raw Response, not c.text(): the headers must land on whatever the handler returns.
    app.get('/', () => new Response('home'));
    app.get('/health', (c) => c.text('ok'));
    app.get('/fail', (c) => c.text('bad', 400));
    app.get('/info', (c) => c.json(infoOf(c.get('rateLimit'))));
    app.get(
      '/cut',
      () =>
        new Response(
          new ReadableStream({ start: (controller) => controller.enqueue(new TextEncoder().encode(PARTIAL)) }),
        ),
    );
    return listen(getRequestListener(app.fetch));
  },
};

const koaAdapter: Adapter = {
  name: 'koa',
  clientAddress: (ctx, options) => koaClientAddress(ctx as Koa.Context, options),
  header: (ctx, name) => (ctx as Koa.Context).get(name) || undefined,
  incoming: (ctx) => (ctx as Koa.Context).req,
  proxySetting: true,
  serve(spec) {
    const app = new Koa();
    // Koa's ctx.ip is the leftmost of the last maxIpsCount addresses: 1 reads only what one proxy appended.
    if (spec.frameworkProxy) Object.assign(app, { proxy: true, maxIpsCount: 1 });
    if (spec.login) {
      const login = new Router();
      login.get('/login', koaRateLimit(spec.login), (ctx) => void (ctx.body = 'login'));
      app.use(login.routes());
    }
    app.use(koaRateLimit(globalOptions(spec, (ctx: Koa.Context) => ctx.path)));
    const routes = new Router();
    routes.get('/', (ctx) => void (ctx.body = 'home'));
    routes.get('/health', (ctx) => void (ctx.body = 'ok'));
    routes.get('/info', (ctx) => void (ctx.body = JSON.stringify(infoOf(ctx.state.rateLimit))));
    routes.get('/cut', (ctx) => void (ctx.body = unending()));
    routes.get('/fail', (ctx) => {
      ctx.status = 400;
      ctx.body = 'bad';
    });
    app.use(routes.routes());
    return listen(app.callback());
  },
};

/** Applies method decorators as TypeScript's legacy decorators do, without their syntax (which tsx does not compile). */
export function decorate(controller: Type, method: string, ...decorators: MethodDecorator[]): void {
  const prototype = controller.prototype as object;
  const descriptor = Object.getOwnPropertyDescriptor(prototype, method) as PropertyDescriptor;
  for (const decorator of decorators.reverse()) decorator(prototype, method, descriptor);
}

/** A Nest app on platform-express, of one module, set up by `configure`, listening on a free port; what fails to start is closed. */
export async function serveNest(
  metadata: ModuleMetadata,
  configure?: (app: NestExpressApplication) => void,
): Promise<RunningApp> {
  class AppModule {}
  Module(metadata)(AppModule);
  const app = await NestFactory.create<NestExpressApplication>(AppModule, { logger: false });
  configure?.(app);
  try {
    await app.listen(0, '127.0.0.1');
  } catch (error) {
    await app.close();
    throw error;
  }
  return { url: await app.getUrl(), close: () => app.close() };
}

const nestAdapter: Adapter = {
  name: 'nestjs',
  clientAddress: (req, options) => nestClientAddress(req as Request, options),
  header: (req, name) => (req as Request).get(name),
  incoming: (req) => req as Request,
  proxySetting: true,
  async serve(spec) {
    // A class per app: the decorators' metadata is the class's.
    class AppController {
      home() {
        return 'home';
      }
      health() {
        return 'ok';
      }
      fail() {
        return 'bad';
      }
      info(req: Request) {
        return JSON.stringify(infoOf(req.rateLimit));
      }
      login() {
        return 'login';
      }
      cut(res: Response) {
        res.write(PARTIAL);
      }
    }
    Controller()(AppController);
    decorate(AppController, 'home', Get('/'));
    decorate(AppController, 'health', Get('/health'));
    decorate(AppController, 'fail', Get('/fail'), HttpCode(400));
    decorate(AppController, 'info', Get('/info'));
    Req()(AppController.prototype, 'info', 0);
    decorate(AppController, 'cut', Get('/cut'));
    // Nest leaves a response it hands over (@Res()) to the handler.
    Res()(AppController.prototype, 'cut', 0);
    if (spec.login) decorate(AppController, 'login', Get('/login'), RateLimit(spec.login));
    return serveNest(
      {
        imports: [
          RateLimitModule.forRoot(
            globalOptions(spec, (req: IncomingMessage) => new URL(req.url ?? '/', 'http://x').pathname),
          ),
        ],
        controllers: [AppController],
        providers: [{ provide: APP_GUARD, useClass: RateLimitGuard }],
      },
      spec.frameworkProxy ? (app) => app.set('trust proxy', 1) : undefined,
    );
  },
};

export const adapters: readonly Adapter[] = [
  expressAdapter('express 5', express5),
  expressAdapter('express 4', express4),
  fastifyAdapter,
  honoAdapter,
  koaAdapter,
  nestAdapter,
  nodeAdapter,
];

export interface Reply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** One GET (or `method`) over a new connection, from a chosen loopback address (127.0.0.0/8 is all loopback). */
export function get(
  url: string,
  options: { from?: string; headers?: Record<string, string>; method?: string } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { agent: false, localAddress: options.from ?? '127.0.0.1', headers: options.headers, method: options.method },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** A GET that gives up once the first chunk of the body arrives, cutting the response off mid-way. Resolves with the status. */
export function cut(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false }, (res) => {
      res.once('data', () => {
        req.destroy();
        resolve(res.statusCode ?? 0);
      });
    });
    req.on('error', (error: NodeJS.ErrnoException) => (error.code === 'ECONNRESET' ? undefined : reject(error)));
    req.end();
  });
}

/**
 * A GET whose client leaves once `entered` resolves (the server has begun deciding it), with
 * X-Leave set so the app's key hook can tell it from others. Resolves once the request is gone.
 */
export function leave(url: string, entered: Promise<void>): Promise<void> {
  const req = request(url, { agent: false, headers: { 'x-leave': '1' } });
  req.on('error', () => undefined);
  req.end();
  return entered.then(() => void req.destroy());
}
