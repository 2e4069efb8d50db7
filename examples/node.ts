import { createServer } from 'node:http';
import { Redis } from 'ioredis';
import { createLimiter, redisStore, slidingLog } from 'sluice';
import { rateLimit } from 'sluice/node';

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
const limit = rateLimit({ limiter });

// limit() never rejects: a callback of yours that throws is logged and answered 500.
const server = createServer((req, res) => {
  void limit(req, res).then((allowed) => {
    if (allowed) res.end('hello');
  });
});

server.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  const address = server.address();
  console.log(`listening on http://127.0.0.1:${typeof address === 'object' ? address?.port : address}`);
});
