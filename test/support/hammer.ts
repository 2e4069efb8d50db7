/**
 * A child process for the multi-process test: connects to Redis, says "ready", waits for "go" on
 * stdin so that every process starts at once, then sends `calls` requests per algorithm on one key,
 * `concurrency` at a time, and prints how many each algorithm admitted as JSON.
 *
 * argv: redis url, client ('ioredis' | 'node-redis'), prefix, limit, window ms, calls, concurrency
 */
import { once } from 'node:events';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { createLimiter, redisStore, type RedisClient } from '../../src/index.js';
import { algorithms } from './algorithms.js';

const [url = '', client, prefix = '', limit, windowMs, calls, concurrency] = process.argv.slice(2);
const nodeRedis = client === 'node-redis' ? createClient({ url }) : undefined;
const ioredis = nodeRedis ? undefined : new Redis(url);
await (nodeRedis ? nodeRedis.connect() : ioredis?.ping());
const store = redisStore((nodeRedis ?? ioredis) as RedisClient);
// 'deny' turns a store failure into a visible shortfall in the count instead of an extra admission.
const limiters = algorithms.map((a) =>
  createLimiter({
    store,
    policy: a.policy(Number(limit), Number(windowMs)),
    prefix,
    timeout: '30s',
    onStoreError: 'deny',
  }),
);

process.stdout.write('ready\n');
await once(process.stdin, 'data');
const admitted = await Promise.all(
  limiters.map(async (limiter) => {
    let count = 0;
    for (let sent = 0; sent < Number(calls); sent += Number(concurrency)) {
      const decisions = await Promise.all(Array.from({ length: Number(concurrency) }, () => limiter.limit('hot')));
      count += decisions.filter((d) => d.allowed).length;
    }
    return count;
  }),
);
process.stdout.write(`${JSON.stringify(admitted)}\n`);
await (nodeRedis ? nodeRedis.quit() : ioredis?.quit());
process.stdin.destroy();
