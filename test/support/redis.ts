import assert from 'node:assert/strict';
import { after, before } from 'node:test';
import { randomUUID } from 'node:crypto';
import { Redis as Upstash } from '@upstash/redis';
import { GlideClient, GlideClusterClient, Logger } from '@valkey/valkey-glide';
import { Cluster, Redis } from 'ioredis';
import { Cluster as ValkeyCluster, Redis as Valkey } from 'iovalkey';
import { createClient, createCluster } from 'redis';
import { serverClockOffset } from '../../src/cli/demo.js';
import type { RedisServer } from '../../src/cli/redis-server.js';
import { memoryStore, redisStore, type Store } from '../../src/index.js';
import { nodesOf, startRedisCluster, type RedisCluster } from './cluster.js';
import { startTestServer, testServer } from './servers.js';
import { startUpstashBridge, type UpstashBridge } from './upstash.js';

// glide logs every error reply at WARN (the NOSCRIPT after each SCRIPT FLUSH, say): the tests
// provoke many, and assert what the store makes of them.
Logger.setLoggerConfig('error');

/**
 * glide's configuration for `addresses`, with a wait for each reply (its default is 250 ms) longer
 * than a busy test machine may take, as the other clients wait as long as it takes.
 */
export function glideConfig(addresses: readonly { host: string; port: number }[]) {
  return { addresses: [...addresses], requestTimeout: 60_000 };
}

/** An @upstash/redis client of the bridge, as an app would make one (auto-pipelining on, base64 replies). */
export function connectUpstash(bridge: UpstashBridge, options: { enableAutoPipelining?: boolean } = {}): Upstash {
  return new Upstash({ url: bridge.url, token: bridge.token, enableTelemetry: false, ...options });
}

/** A store under test, and, for Redis, a raw client to look behind its back. */
export interface StoreCase {
  readonly name: string;
  /** Known when tests are declared, unlike the client below. */
  readonly inRedis: boolean;
  store(): Store;
  /** The Redis holding the state, for TTL checks, SCAN and SCRIPT FLUSH; undefined for memory. */
  readonly redis: Redis | Cluster | undefined;
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
 * Starts a private server for this test file (stopped after it; testServer: the redis-server on
 * PATH unless SLUICE_SERVER names another) and opens, on it, one client of each kind sluice
 * supports (@upstash/redis through a bridge speaking Upstash's REST API). With `cluster`, also a
 * private cluster (3 masters, 3 replicas) and a cluster client of each kind. The cases are known when tests are declared;
 * their stores and clients are ready once `before` has run. `serverArgs` go to the standalone
 * server (e.g. WITHOUT_PEXPIRETIME), whose cases are then named after the server and `variant`
 * (e.g. 'redis without PEXPIRETIME').
 */
export function useRedis(
  options: { cluster?: boolean; serverArgs?: readonly string[]; variant?: string } = {},
): Harness {
  let server: RedisServer | undefined;
  let redis: Redis | undefined;
  let nodeRedis: ReturnType<typeof createClient> | undefined;
  let valkey: Valkey | undefined;
  let glide: GlideClient | undefined;
  let bridge: UpstashBridge | undefined;
  let upstash: Upstash | undefined;
  let cluster: RedisCluster | undefined;
  let ioCluster: Cluster | undefined;
  let nodeCluster: ReturnType<typeof createCluster> | undefined;
  let valkeyCluster: ValkeyCluster | undefined;
  let glideCluster: GlideClusterClient | undefined;
  let clockOffsetMs = 0;
  const ready = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the Redis harness is used before its before() hook ran');
    return value;
  };
  before(async () => {
    server = await startTestServer(options.serverArgs);
    redis = new Redis(server.url);
    nodeRedis = createClient({ url: server.url });
    await nodeRedis.connect();
    valkey = new Valkey(server.url);
    glide = await GlideClient.createClient(glideConfig([{ host: '127.0.0.1', port: server.port }]));
    bridge = await startUpstashBridge(server.port);
    upstash = connectUpstash(bridge);
    clockOffsetMs = await serverClockOffset(redis);
    if (options.cluster) {
      cluster = await startRedisCluster();
      ioCluster = new Cluster([...cluster.rootNodes]);
      await new Promise((resolve) => ioCluster?.once('ready', resolve));
      nodeCluster = createCluster({
        rootNodes: cluster.rootNodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })),
      });
      await nodeCluster.connect();
      valkeyCluster = new ValkeyCluster([...cluster.rootNodes]);
      await new Promise((resolve) => valkeyCluster?.once('ready', resolve));
      glideCluster = await GlideClusterClient.createClient(glideConfig(cluster.rootNodes));
    }
  });
  after(async () => {
    glideCluster?.close();
    await valkeyCluster?.quit();
    await nodeCluster?.close();
    await ioCluster?.quit();
    await cluster?.stop();
    await bridge?.stop();
    glide?.close();
    await valkey?.quit();
    await nodeRedis?.quit();
    await redis?.quit();
    await server?.stop();
  });
  // Every node of the cluster runs on this machine's clock, like the standalone server.
  const redisCase = (
    name: string,
    store: () => Store,
    raw: () => Redis | Cluster | undefined = () => redis,
  ): StoreCase => ({
    name,
    inRedis: true,
    store,
    get redis() {
      return ready(raw());
    },
    get clockOffsetMs() {
      return clockOffsetMs;
    },
  });
  const standalone = options.variant ? `${testServer.name} ${options.variant}` : testServer.name;
  return {
    get server() {
      return ready(server);
    },
    get redis() {
      return ready(redis);
    },
    cases: [
      // The memory store does not depend on the server: it runs beside the redis-server on PATH alone.
      ...(testServer.matrix
        ? []
        : [{ name: 'memory', inRedis: false, store: () => memoryStore(), redis: undefined, clockOffsetMs: 0 }]),
      redisCase(`${standalone} (ioredis)`, () => redisStore(ready(redis))),
      redisCase(`${standalone} (node-redis)`, () => redisStore(ready(nodeRedis))),
      redisCase(`${standalone} (iovalkey)`, () => redisStore(ready(valkey))),
      redisCase(`${standalone} (valkey-glide)`, () => redisStore(ready(glide))),
      redisCase(`${standalone} (@upstash/redis over REST)`, () => redisStore(ready(upstash))),
      ...(options.cluster
        ? [
            redisCase(
              `${testServer.name} cluster (ioredis)`,
              () => redisStore(ready(ioCluster)),
              () => ioCluster,
            ),
            redisCase(
              `${testServer.name} cluster (node-redis)`,
              () => redisStore(ready(nodeCluster)),
              () => ioCluster,
            ),
            redisCase(
              `${testServer.name} cluster (iovalkey)`,
              () => redisStore(ready(valkeyCluster)),
              () => ioCluster,
            ),
            redisCase(
              `${testServer.name} cluster (valkey-glide)`,
              () => redisStore(ready(glideCluster)),
              () => ioCluster,
            ),
          ]
        : []),
    ],
  };
}

/** A server as Redis 6.2 is to tokenBucket and gcra: without PEXPIRETIME (new in Redis 7.0). */
export const WITHOUT_PEXPIRETIME = ['--rename-command', 'PEXPIRETIME', ''];

/** A prefix no other test uses. */
export function uniquePrefix(): string {
  return `t-${randomUUID().slice(0, 8)}`;
}

/**
 * Every key under a prefix, with its PTTL: on every master of a cluster. A key that expires
 * between SCAN and PTTL (-2) is left out: it is gone, which is what a TTL is for.
 */
export async function keysWithTtl(redis: Redis | Cluster, prefix: string): Promise<Map<string, number>> {
  const found = new Map<string, number>();
  for (const node of nodesOf(redis, 'master')) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) {
        const ttl = await node.pttl(key);
        if (ttl !== -2) found.set(key, ttl);
      }
    } while (cursor !== '0');
  }
  return found;
}

/** Asserts that every key under `prefix` has a TTL (in Redis; the memory store keeps none without one). */
export async function assertEveryKeyHasTtl(storeCase: StoreCase, prefix: string): Promise<void> {
  if (!storeCase.redis) return;
  for (const [key, ttl] of await keysWithTtl(storeCase.redis, prefix)) assert.ok(ttl !== -1, `${key} has no TTL`);
}

/** SCRIPT FLUSH on the server, or on every node of a cluster. */
export async function flushScripts(redis: Redis | Cluster): Promise<void> {
  await Promise.all(nodesOf(redis, 'all').map((node) => node.script('FLUSH')));
}
