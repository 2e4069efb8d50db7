import Fastify from 'fastify';
import { Redis } from 'ioredis';
import { createLimiter, redisStore, slidingLog } from 'sluice';
import { rateLimit } from 'sluice/fastify';

// One retry, not ioredis's default 20: while Redis is down, a request waits milliseconds, not seconds.
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
const limiter = createLimiter({ store: redisStore(redis), policy: slidingLog({ limit: 5, window: '1m', name: 'per-minute' }) });

const app = Fastify();
await app.register(rateLimit, { limiter });
app.get('/', async () => 'hello');

const url = await app.listen({ port: Number(process.env.PORT ?? 3000), host: '127.0.0.1' });
console.log(`listening on ${url}`);
