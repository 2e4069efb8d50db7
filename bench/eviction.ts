/**
 * What Redis eviction does to limits: 200 clients each spend a fixed window of 5 per hour, the
 * application then writes 8,000 values of 1 KB without a TTL into a 4 MB Redis, and each client
 * asks once more. Run per maxmemory-policy; docs/reliability.md ("Eviction") reports it.
 *
 *   npx tsx bench/eviction.ts
 */
import { Redis } from 'ioredis';
import { startRedisServer } from '../src/cli/redis-server.js';
import { createLimiter, fixedWindow, redisStore } from '../src/index.js';

const CLIENTS = 200;
const LIMIT = 5;

async function afterApplicationWrites(policy: string) {
  const server = await startRedisServer(['--maxmemory', '4mb', '--maxmemory-policy', policy]);
  const redis = new Redis(server.url);
  try {
    const limiter = createLimiter({
      store: redisStore(redis),
      policy: fixedWindow({ limit: LIMIT, window: '1h' }),
      onStoreError: 'deny',
    });
    const clients = Array.from({ length: CLIENTS }, (_, i) => `client${i}`);
    for (const client of clients) for (let i = 0; i < LIMIT; i++) await limiter.limit(client);
    let refused = 0;
    const value = 'x'.repeat(1_000);
    for (let i = 0; i < 8_000; i++) await redis.set(`app:${i}`, value).catch(() => refused++);
    let admittedAgain = 0;
    for (const client of clients) if ((await limiter.limit(client)).allowed) admittedAgain++;
    const sluiceKeys = (await redis.keys('sluice:*')).length;
    return {
      policy,
      admittedAgain: `${admittedAgain} of ${CLIENTS}`,
      sluiceKeysAtTheEnd: sluiceKeys,
      applicationWritesRefused: refused,
    };
  } finally {
    redis.disconnect();
    await server.stop();
  }
}

const results = [];
for (const policy of ['allkeys-lru', 'volatile-lru', 'noeviction']) results.push(await afterApplicationWrites(policy));
console.table(results);
