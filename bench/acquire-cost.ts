import { Redis } from 'ioredis';
import { startRedisServer } from '../src/cli/redis-server.js';
import { concurrency, createLimiter, redisStore } from '../src/index.js';

/*
 * How long one concurrency acquire of a whole limit, and its release, hold a private Redis (the
 * script writes and removes one sorted-set member per unit, and Redis answers no one meanwhile):
 *
 *   npx tsx bench/acquire-cost.ts [limit ...]
 */
const limits = process.argv.slice(2).map(Number);
const server = await startRedisServer();
const redis = new Redis(server.port);
try {
  for (const limit of limits.length > 0 ? limits : [10_000, 100_000, 1_000_000]) {
    const limiter = createLimiter({
      store: redisStore(redis),
      policy: concurrency({ limit, leaseMs: '1m' }),
      prefix: `acquire-${limit}`,
      timeout: '1m',
    });
    const started = performance.now();
    const lease = await limiter.acquire('k', { cost: limit });
    const acquiredMs = performance.now() - started;
    const releasing = performance.now();
    await lease.release();
    const releasedMs = performance.now() - releasing;
    console.log(
      `limit ${limit}: acquire of every unit ${acquiredMs.toFixed(0)} ms (allowed: ${lease.allowed}), release ${releasedMs.toFixed(0)} ms`,
    );
  }
} finally {
  redis.disconnect();
  await server.stop();
}
