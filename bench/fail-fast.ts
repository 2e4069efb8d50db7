/**
 * How long a request waits for the middleware while Redis is down, by Redis client setup: an
 * HTTP server on sluice/node (limiter timeout 1 s, the default) whose Redis is stopped after the
 * client is ready; each of 8 requests in a row is timed. docs/middleware.md ("When the store
 * fails") and docs/reliability.md report it.
 *
 *   npx tsx bench/fail-fast.ts
 */
import { once } from 'node:events';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis, type RedisOptions } from 'ioredis';
import { createClient, type RedisClientOptions } from 'redis';
import { rateLimit } from '../src/adapters/node.js';
import { startRedisServer } from '../src/cli/redis-server.js';
import { createLimiter, redisStore, slidingLog, type Store } from '../src/index.js';

const REQUESTS = 8;

function status(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    request(url, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    })
      .on('error', reject)
      .end();
  });
}

interface Client {
  store: Store;
  close(): void;
}

async function waitsWhileDown(setup: string, connect: (url: string) => Promise<Client>): Promise<void> {
  const server = await startRedisServer();
  const client = await connect(server.url);
  const limiter = createLimiter({
    store: client.store,
    policy: slidingLog({ limit: 5, window: '1m' }),
    onOutage: () => undefined,
  });
  const limit = rateLimit({ limiter });
  const http = createServer((req, res) => void limit(req, res).then((pass) => pass && res.end('hello')));
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/`;
  await status(url);
  await server.stop();
  const waits: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const start = performance.now();
    await status(url);
    waits.push(Math.round(performance.now() - start));
  }
  console.log(`${setup.padEnd(64)} ms per request: ${waits.join(' ')}`);
  http.close();
  client.close();
}

const ioredis =
  (options: RedisOptions) =>
  async (url: string): Promise<Client> => {
    const redis = new Redis(url, options);
    redis.on('error', () => undefined);
    await once(redis, 'ready');
    return { store: redisStore(redis), close: () => redis.disconnect() };
  };

const nodeRedis =
  (options: RedisClientOptions) =>
  async (url: string): Promise<Client> => {
    const client = createClient({ url, ...options });
    client.on('error', () => undefined);
    await client.connect();
    return { store: redisStore(client), close: () => void client.disconnect().catch(() => undefined) };
  };

await waitsWhileDown('ioredis {}', ioredis({}));
await waitsWhileDown('ioredis { maxRetriesPerRequest: 1 }', ioredis({ maxRetriesPerRequest: 1 }));
await waitsWhileDown('ioredis { enableOfflineQueue: false }', ioredis({ enableOfflineQueue: false }));
await waitsWhileDown(
  'ioredis { enableOfflineQueue: false, maxRetriesPerRequest: 1 }',
  ioredis({ enableOfflineQueue: false, maxRetriesPerRequest: 1 }),
);
await waitsWhileDown('node-redis {}', nodeRedis({}));
await waitsWhileDown('node-redis { disableOfflineQueue: true }', nodeRedis({ disableOfflineQueue: true }));
process.exit(0);
