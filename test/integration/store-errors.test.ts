import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { startRedisServer } from '../../src/cli/redis-server.js';
import { StoreError, createLimiter, fixedWindow, redisStore } from '../../src/index.js';

describe('store failures', () => {
  it('are answered by the failure policy, with a StoreError carrying the cause, when Redis is gone', async () => {
    const server = await startRedisServer();
    const redis = new Redis(server.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
    const connectionErrors: unknown[] = [];
    redis.on('error', (error) => connectionErrors.push(error));
    try {
      await new Promise((resolve) => redis.once('ready', resolve));
      const limiter = createLimiter({ store: redisStore(redis), policy: fixedWindow({ limit: 5, window: '1s' }), onStoreError: 'deny', hooks: { storeError: () => {} } });
      assert.equal((await limiter.limit('k')).allowed, true);
      await server.stop();
      const decision = await limiter.limit('k');
      assert.equal(decision.reason, 'store-error');
      assert.ok(decision.error instanceof StoreError);
      assert.equal(decision.error.code, 'SLUICE_STORE_ERROR');
      assert.ok(decision.error.cause instanceof Error);
    } finally {
      redis.disconnect();
      await server.stop();
    }
  });
});
