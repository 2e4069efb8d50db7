import { serve } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { Hono } from 'hono';
import { Redis } from 'ioredis';
import { createLimiter, redisStore, slidingLog } from 'sluice';
import { rateLimit } from 'sluice/hono';

// No offline queue: while Redis is down a command fails at once, so a request waits milliseconds, not
// the limiter's 1 s timeout (bench/fail-fast.ts). Commands then fail before the first connection too: connect first.
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  lazyConnect: true,
});
await redis.connect();
const limiter = createLimiter({
  store: redisStore(redis),
  policy: slidingLog({ limit: 5, window: '1m', name: 'per-minute' }),
});

const app = new Hono();
app.use(rateLimit({ limiter, getConnInfo }));
app.get('/', (c) => c.text('hello'));

serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 3000), hostname: '127.0.0.1' }, (info) => {
  console.log(`listening on http://127.0.0.1:${info.port}`);
});
