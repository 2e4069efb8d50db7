import type { Redis } from 'ioredis';
import { redisStore, type Store } from '../index.js';
import { UsageError } from './command.js';

export interface RedisConnection {
  readonly client: Redis;
  readonly store: Store;
  /** The URL with any password masked, safe to print. */
  readonly safeUrl: string;
  close(): Promise<void>;
}

/** The URL with its password replaced by "***", for messages and output. */
export function maskPassword(url: URL): string {
  const masked = new URL(url.href);
  if (masked.password) masked.password = '***';
  return masked.href;
}

/** The URL, or a one-line UsageError naming `source` (--redis, REDIS_URL) and the bad value. */
export function parseRedisUrl(text: string, source: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`sluice: ${source} must be a URL such as redis://127.0.0.1:6379; got ${JSON.stringify(text)}`);
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    throw new UsageError(
      `sluice: ${source} must start with redis:// or rediss://; got ${JSON.stringify(maskPassword(url))}`,
    );
  }
  return url;
}

/**
 * Connects with ioredis and fails fast: one attempt, no reconnecting and no offline queue, so a
 * wrong URL or a down server ends the command with an error instead of hanging.
 * `source` names where the URL came from (--redis or REDIS_URL) for error messages.
 */
export async function connectRedis(text: string, source: string): Promise<RedisConnection> {
  const url = parseRedisUrl(text, source);
  const safeUrl = maskPassword(url);
  let ioredis;
  try {
    ioredis = await import('ioredis');
  } catch {
    throw new Error('sluice: the sluice command talks to Redis through ioredis; install it: npm install ioredis');
  }
  const client = new ioredis.Redis(url.href, {
    lazyConnect: true,
    connectTimeout: 5000,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
    // Its INFO is one command more than the least-privilege ACL grants (docs/reliability.md), and
    // without it ioredis warns; a server still loading fails the command itself with LOADING.
    enableReadyCheck: false,
    // CLIENT SETINFO (Redis 7.2 and later) too: refused, it is ignored but an entry in ACL LOG.
    disableClientInfo: true,
  });
  // Commands reject with their own errors; the socket's error (ECONNREFUSED, a bad password) only
  // comes here, while connect() rejects with a bare "Connection is closed".
  let socketError: unknown;
  client.on('error', (error: unknown) => {
    socketError = error;
  });
  try {
    await client.connect();
  } catch (error) {
    client.disconnect();
    const reason = socketError ?? error;
    throw new Error(
      `sluice: cannot connect to Redis at ${safeUrl}: ${reason instanceof Error ? reason.message : String(reason)}`,
      { cause: error },
    );
  }
  return {
    client,
    store: redisStore(client),
    safeUrl,
    async close() {
      await client.quit();
    },
  };
}
