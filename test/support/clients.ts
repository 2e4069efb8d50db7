import { once } from 'node:events';
import { GlideClient } from '@valkey/valkey-glide';
import { Redis } from 'ioredis';
import { Redis as Valkey } from 'iovalkey';
import { createClient } from 'redis';
import type { RedisClient } from '../../src/index.js';
import { connectUpstash, glideConfig } from './redis.js';
import { startUpstashBridge } from './upstash.js';

/** A client, open, and how to close it (and what it needed: the REST bridge of @upstash/redis). */
export interface Connected {
  readonly client: RedisClient;
  readonly close: () => void | Promise<void>;
}

export interface ConnectOptions {
  /** An ACL user to log in as. */
  readonly login?: { readonly username: string; readonly password: string };
  /**
   * Set up as docs/reliability.md advises: while Redis is gone a call fails at once (no offline
   * queue, no waiting for a reconnect) instead of waiting for the limiter's timeout.
   */
  readonly failFast?: boolean;
}

/**
 * Whether a store over this kind of client checks the server's eviction setting (INFO): all but
 * @upstash/redis, whose eviction is a setting of the Upstash database (docs/reliability.md, "Eviction").
 */
export function checksEviction(kind: string): boolean {
  return !kind.startsWith('@upstash/redis');
}

/** How long glide waits for a reply when failing fast: a reply, or its failure, well within a limiter's default 1 s. */
const GLIDE_FAIL_FAST_MS = 250;

/**
 * One client of each kind redisStore accepts, connected to the redis-server on 127.0.0.1:`port`.
 * ioredis and iovalkey skip their ready check (INFO), which a server or user may refuse.
 */
export const clientKinds: Record<string, (port: number, options?: ConnectOptions) => Promise<Connected>> = {
  ioredis: (port, options) => connectIoRedis(new Redis(port, '127.0.0.1', ioRedisOptions(options))),
  iovalkey: (port, options) => connectIoRedis(new Valkey(port, '127.0.0.1', ioRedisOptions(options))),
  'node-redis': async (port, { login, failFast } = {}) => {
    const client = createClient({
      socket: { host: '127.0.0.1', port, ...(failFast ? { reconnectStrategy: false } : {}) },
      ...login,
      disableOfflineQueue: failFast,
    });
    client.on('error', () => undefined);
    await client.connect();
    return { client, close: () => client.destroy() };
  },
  'valkey-glide': async (port, { login, failFast } = {}) => {
    const config = glideConfig([{ host: '127.0.0.1', port }]);
    const client = await GlideClient.createClient({
      ...config,
      credentials: login,
      requestTimeout: failFast ? GLIDE_FAIL_FAST_MS : config.requestTimeout,
    });
    return { client, close: () => client.close() };
  },
  '@upstash/redis': (port, { login } = {}) => connectOverRest(port, login, {}),
  // Each call an HTTP request of its own, whose refusals the client words otherwise.
  '@upstash/redis (no auto-pipelining)': (port, { login } = {}) =>
    connectOverRest(port, login, { enableAutoPipelining: false }),
};

function ioRedisOptions({ login, failFast }: ConnectOptions = {}) {
  return {
    ...login,
    enableReadyCheck: false,
    ...(failFast ? { maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null } : {}),
  };
}

async function connectIoRedis(client: Redis | Valkey): Promise<Connected> {
  client.on('error', () => undefined);
  await once(client, 'ready');
  return { client, close: () => client.disconnect() };
}

/** @upstash/redis through a bridge of its own, which fails at once whatever the options: a REST API answers each request. */
async function connectOverRest(
  port: number,
  login: ConnectOptions['login'],
  options: Parameters<typeof connectUpstash>[1],
): Promise<Connected> {
  const bridge = await startUpstashBridge(port, login);
  return { client: connectUpstash(bridge, options), close: () => bridge.stop() };
}
