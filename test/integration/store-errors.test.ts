import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { startRedisServer } from '../../src/cli/redis-server.js';
import { StoreError, createLimiter, fixedWindow, redisStore, slidingLog } from '../../src/index.js';

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

  it('include a key that holds another type (WRONGTYPE)', async () => {
    const server = await startRedisServer();
    const redis = new Redis(server.url);
    try {
      const limiter = createLimiter({ store: redisStore(redis), prefix: 'p', policy: fixedWindow({ limit: 5, window: '1s' }), hooks: { storeError: () => {} } });
      await redis.hset('p:{k}:fw', 'x', '1');
      const decision = await limiter.limit('k');
      assert.deepEqual([decision.allowed, decision.reason], [true, 'store-error']);
      assert.match(decision.error?.message ?? '', /WRONGTYPE/);
    } finally {
      await redis.quit();
      await server.stop();
    }
  });

  it('include state written by hand that is not a whole number, which is never rounded into a write', async () => {
    const server = await startRedisServer();
    const redis = new Redis(server.url);
    try {
      const limiter = createLimiter({ store: redisStore(redis), prefix: 'p', policy: slidingLog({ limit: 3, window: '1h' }), hooks: { storeError: () => {} } });
      assert.equal((await limiter.limit('k')).allowed, true);
      const [seconds] = await redis.time();
      await redis.zadd('p:{k}:sl', Number(seconds) * 1000 + 10_000.5, '1');
      for (let i = 0; i < 4; i++) {
        const decision = await limiter.limit('k');
        assert.deepEqual([decision.allowed, decision.reason], [true, 'store-error']);
        assert.match(decision.error?.message ?? '', /not an integer: 1\d+\.5/);
      }
      assert.equal(await redis.zcard('p:{k}:sl'), 2, 'nothing was added at a rounded score');
    } finally {
      await redis.quit();
      await server.stop();
    }
  });
});
