import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { startRedisServer } from '../../src/cli/redis-server.js';
import { StoreError, createLimiter, fixedWindow, redisStore } from '../../src/index.js';

describe('store failures', () => {
  it('reject with a StoreError carrying the cause when Redis is gone', async () => {
    const server = await startRedisServer();
    const redis = new Redis(server.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
    const connectionErrors: unknown[] = [];
    redis.on('error', (error) => connectionErrors.push(error));
    try {
      await new Promise((resolve) => redis.once('ready', resolve));
      const limiter = createLimiter({ store: redisStore(redis), policy: fixedWindow({ limit: 5, window: '1s' }) });
      assert.equal((await limiter.limit('k')).allowed, true);
      await server.stop();
      await assert.rejects(limiter.limit('k'), (error: unknown) => {
        assert.ok(error instanceof StoreError);
        assert.equal(error.code, 'SLUICE_STORE_ERROR');
        assert.ok(error.cause instanceof Error);
        return true;
      });
    } finally {
      redis.disconnect();
      await server.stop();
    }
  });

  it('reject with a StoreError when the key holds another type', async () => {
    const server = await startRedisServer();
    const redis = new Redis(server.url);
    try {
      const limiter = createLimiter({ store: redisStore(redis), prefix: 'p', policy: fixedWindow({ limit: 5, window: '1s' }) });
      await redis.hset('p:{k}:fw', 'x', '1');
      await assert.rejects(limiter.limit('k'), (error: unknown) => error instanceof StoreError && /WRONGTYPE/.test(error.message));
    } finally {
      await redis.quit();
      await server.stop();
    }
  });
});
