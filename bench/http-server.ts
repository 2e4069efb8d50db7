/**
 * One HTTP server under test, in a process of its own: `node --import tsx bench/http-server.ts '<ServerConfig JSON>'`,
 * started by bench/http.ts over IPC. It answers `GET /` with `ok` behind the configured limiter,
 * sends `{ port }` once it listens, and exits when its parent goes away.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Express, RequestHandler } from 'express';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { RateLimiterAbstract, RateLimiterRes } from 'rate-limiter-flexible';
import type { Limiter } from '../dist/esm/index.js';
import { HTTP_POLICY, TRUSTED_PROXY_HOPS, type ServerConfig } from './http-contenders.js';

const { limit, windowSeconds } = HTTP_POLICY;
const windowMs = windowSeconds * 1000;

// Each server imports only its own framework and limiter (dynamically), so that it starts quickly.

async function redisOf(config: ServerConfig): Promise<Redis | undefined> {
  if (config.store !== 'redis') return undefined;
  if (config.redisUrl === undefined) throw new Error('a Redis store needs redisUrl');
  const { Redis } = await import('ioredis');
  return new Redis(config.redisUrl, { enableAutoPipelining: config.autoPipelining ?? false });
}

async function sluiceLimiter(redis: Redis | undefined): Promise<Limiter> {
  const { createLimiter, fixedWindow, memoryStore, redisStore } = await import('../dist/esm/index.js');
  return createLimiter({
    store: redis ? redisStore(redis) : memoryStore(),
    policy: fixedWindow({ limit, window: windowMs }),
    prefix: 'bench-http',
  });
}

interface FlexibleOutcome {
  readonly status: 200 | 429;
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * The middleware a user of rate-limiter-flexible writes: consume one point for the key, and send
 * the usual X-RateLimit-* fields, those @fastify/rate-limit and express-rate-limit send by default.
 */
async function flexibleMiddleware(redis: Redis | undefined): Promise<(key: string) => Promise<FlexibleOutcome>> {
  const { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } = await import('rate-limiter-flexible');
  const options = { points: limit, duration: windowSeconds, keyPrefix: 'bench-http-rlf' };
  const limiter: RateLimiterAbstract = redis
    ? new RateLimiterRedis({ ...options, storeClient: redis })
    : new RateLimiterMemory(options);
  const outcome = (status: 200 | 429, res: RateLimiterRes): FlexibleOutcome => ({
    status,
    headers: {
      'X-RateLimit-Limit': String(limit),
      'X-RateLimit-Remaining': String(res.remainingPoints),
      'X-RateLimit-Reset': String(Math.ceil(res.msBeforeNext / 1000)),
    },
  });
  return (key) =>
    limiter.consume(key).then(
      (res) => outcome(200, res),
      (reason: unknown) => {
        // A denial rejects with the result, not an Error; anything else is a failure.
        if (reason instanceof RateLimiterRes) return outcome(429, reason);
        throw reason;
      },
    );
}

/** The client of a plain node:http server behind the trusted proxies: the hop the farthest one appended. */
function forwardedClient(req: IncomingMessage): string {
  const header = req.headers['x-forwarded-for'];
  const hops = typeof header === 'string' ? header.split(',') : [];
  return hops.length >= TRUSTED_PROXY_HOPS
    ? (hops[hops.length - TRUSTED_PROXY_HOPS] as string).trim()
    : (req.socket.remoteAddress ?? '');
}

async function expressLimiter(config: ServerConfig, redis: Redis | undefined): Promise<RequestHandler | undefined> {
  switch (config.limiter) {
    case undefined:
      return undefined;
    case 'sluice': {
      const { rateLimit } = await import('../dist/esm/adapters/express.js');
      return rateLimit({ limiter: await sluiceLimiter(redis), trustedProxies: TRUSTED_PROXY_HOPS });
    }
    case 'express-rate-limit': {
      const { rateLimit } = await import('express-rate-limit');
      const { RedisStore } = await import('rate-limit-redis');
      const store = redis
        ? new RedisStore({
            sendCommand: (command: string, ...args: string[]) => redis.call(command, ...args) as never,
            prefix: 'bench-http-erl:',
          })
        : undefined;
      return rateLimit({ windowMs, limit, store });
    }
    case 'rate-limiter-flexible': {
      const consume = await flexibleMiddleware(redis);
      return (req, res, next) => {
        consume(req.ip ?? '').then(({ status, headers }) => {
          res.set(headers);
          if (status === 200) next();
          else res.status(status).send('Too Many Requests');
        }, next);
      };
    }
    default:
      throw new Error(`${config.limiter} has no Express middleware`);
  }
}

async function expressApp(config: ServerConfig, redis: Redis | undefined): Promise<Express> {
  const { default: express } = await import('express');
  const app = express();
  app.set('trust proxy', TRUSTED_PROXY_HOPS);
  const middleware = await expressLimiter(config, redis);
  if (middleware) app.use(middleware);
  app.get('/', (_req, res) => {
    res.send('ok');
  });
  return app;
}

async function fastifyServer(config: ServerConfig, redis: Redis | undefined): Promise<FastifyInstance> {
  const { default: Fastify } = await import('fastify');
  // Express's `trust proxy: 1` as a function: Fastify 5 given a number trusts no hop at all.
  const app = Fastify({ trustProxy: (_address, hop) => hop < TRUSTED_PROXY_HOPS, logger: false });
  switch (config.limiter) {
    case undefined:
      break;
    case 'sluice': {
      const { rateLimit } = await import('../dist/esm/adapters/fastify.js');
      await app.register(rateLimit, { limiter: await sluiceLimiter(redis), trustedProxies: TRUSTED_PROXY_HOPS });
      break;
    }
    case '@fastify/rate-limit': {
      const { default: rateLimit } = await import('@fastify/rate-limit');
      // Its memory store is an LRU of `cache` keys (default 5,000): room for every client, as the others have.
      await app.register(rateLimit, { max: limit, timeWindow: windowMs, cache: 20_000, ...(redis ? { redis } : {}) });
      break;
    }
    case 'rate-limiter-flexible': {
      const consume = await flexibleMiddleware(redis);
      app.addHook('onRequest', async (request, reply) => {
        const { status, headers } = await consume(request.ip);
        reply.headers(headers);
        if (status !== 200) return reply.code(status).send('Too Many Requests');
      });
      break;
    }
    default:
      throw new Error(`${config.limiter} has no Fastify plugin`);
  }
  // A promise, as a typical Fastify app's async handlers return (the figures in docs/benchmarks.md were so measured).
  app.get('/', () => Promise.resolve('ok'));
  return app;
}

async function nodeHandler(
  config: ServerConfig,
  redis: Redis | undefined,
): Promise<(req: IncomingMessage, res: ServerResponse) => void> {
  switch (config.limiter) {
    case undefined:
      return (_req, res) => res.end('ok');
    case 'sluice': {
      const { rateLimit } = await import('../dist/esm/adapters/node.js');
      const limitRequest = rateLimit({ limiter: await sluiceLimiter(redis), trustedProxies: TRUSTED_PROXY_HOPS });
      return (req, res) => {
        void limitRequest(req, res).then((pass) => pass && res.end('ok'));
      };
    }
    case 'rate-limiter-flexible': {
      const consume = await flexibleMiddleware(redis);
      return (req, res) => {
        consume(forwardedClient(req)).then(
          ({ status, headers }) => {
            res.writeHead(status, headers).end(status === 200 ? 'ok' : 'Too Many Requests');
          },
          (error: unknown) => {
            console.error(error);
            res.writeHead(500).end();
          },
        );
      };
    }
    default:
      throw new Error(`${config.limiter} has no node:http middleware`);
  }
}

/** Starts the configured server on a free loopback port and returns that port. */
async function serve(config: ServerConfig): Promise<number> {
  const redis = await redisOf(config);
  if (config.framework === 'fastify') {
    const app = await fastifyServer(config, redis);
    await app.listen({ host: '127.0.0.1', port: 0 });
    return (app.server.address() as AddressInfo).port;
  }
  const server = createServer(
    config.framework === 'express' ? await expressApp(config, redis) : await nodeHandler(config, redis),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

if (process.send === undefined) {
  console.error('bench/http-server.ts is started by bench/http.ts, over IPC');
  process.exit(1);
}
const config = JSON.parse(process.argv[2] ?? '{}') as ServerConfig;
// The bench holds the IPC channel open while it needs this server: once it is gone, so is the server.
process.on('disconnect', () => process.exit(0));
// The bench reads this process's CPU time around each measurement (HttpSample.cpuMicrosPerRequest).
process.on('message', (message) => {
  if (message !== 'cpu') return;
  const { user, system } = process.cpuUsage();
  process.send?.({ cpuMicros: user + system });
});
serve(config).then(
  (port) => process.send?.({ port }),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
