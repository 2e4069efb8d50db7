import { after, before } from 'node:test';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { startRedisServer, type RedisServer } from '../../src/cli/redis-server.js';
import { memoryStore, redisStore, type Store } from '../../src/index.js';

/** A store under test, and, for Redis, a raw client to look behind its back. */
export interface StoreCase {
  readonly name: string;
  /** Known when tests are declared, unlike the client below. */
  readonly inRedis: boolean;
  store(): Store;
  /** The Redis holding the state, for TTL checks, SCAN and SCRIPT FLUSH; undefined for memory. */
  readonly redis: Redis | undefined;
  /** The store's clock minus this process's clock. */
  readonly clockOffsetMs: number;
}

export interface Harness {
  readonly server: RedisServer;
  /** A raw ioredis client of the private server. */
  readonly redis: Redis;
  readonly cases: readonly StoreCase[];
}

/**
 * Starts a private redis-server for this test file (stopped after it) and opens, on it, one
 * client of each kind sluice supports. The cases are known when tests are declared; their
 * stores and clients are ready once `before` has run.
 */
export function useRedis(): Harness {
  let server: RedisServer | undefined;
  let redis: Redis | undefined;
  let nodeRedis: ReturnType<typeof createClient> | undefined;
  let clockOffsetMs = 0;
  const ready = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the Redis harness is used before its before() hook ran');
    return value;
  };
  before(async () => {
    server = await startRedisServer();
    redis = new Redis(server.url);
    nodeRedis = createClient({ url: server.url });
    await nodeRedis.connect();
    const [seconds, micros] = await redis.time();
    clockOffsetMs = Number(seconds) * 1000 + Number(micros) / 1000 - Date.now();
  });
  after(async () => {
    await nodeRedis?.quit();
    await redis?.quit();
    await server?.stop();
  });
  const redisCase = (name: string, store: () => Store): StoreCase => ({
    name,
    inRedis: true,
    store,
    get redis() {
      return ready(redis);
    },
    get clockOffsetMs() {
      return clockOffsetMs;
    },
  });
  return {
    get server() {
      return ready(server);
    },
    get redis() {
      return ready(redis);
    },
    cases: [
      { name: 'memory', inRedis: false, store: () => memoryStore(), redis: undefined, clockOffsetMs: 0 },
      redisCase('redis (ioredis)', () => redisStore(ready(redis))),
      redisCase('redis (node-redis)', () => redisStore(ready(nodeRedis))),
    ],
  };
}

/** A prefix no other test uses. */
export function uniquePrefix(): string {
  return `t-${randomUUID().slice(0, 8)}`;
}

/** Every key under a prefix, with its PTTL. */
export async function keysWithTtl(redis: Redis, prefix: string): Promise<Map<string, number>> {
  const found = new Map<string, number>();
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) found.set(key, await redis.pttl(key));
  } while (cursor !== '0');
  return found;
}
