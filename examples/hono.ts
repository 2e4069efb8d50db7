import { serve } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { Hono } from 'hono';
import { Redis } from 'ioredis';
import { createLimiter, redisStore, slidingLog } from 'sluice';
import { rateLimit } from 'sluice/hono';

// One retry, not ioredis's default 20: while Redis is down, a request waits milliseconds, not seconds.
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
const limiter = createLimiter({ store: redisStore(redis), policy: slidingLog({ limit: 5, window: '1m', name: 'per-minute' }) });

const app = new Hono();
app.use(rateLimit({ limiter, getConnInfo }));
app.get('/', (c) => c.text('hello'));

serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 3000), hostname: '127.0.0.1' }, (info) => {
  console.log(`listening on http://127.0.0.1:${info.port}`);
});
