import Koa from 'koa';
import { Redis } from 'ioredis';
import { createLimiter, redisStore, slidingLog } from 'sluice';
import { rateLimit } from 'sluice/koa';

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

const app = new Koa();
app.use(rateLimit({ limiter }));
app.use((ctx) => {
  ctx.body = 'hello';
});

const server = app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  const address = server.address();
  console.log(`listening on http://127.0.0.1:${typeof address === 'object' ? address?.port : address}`);
});
