import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { fixedWindow } from '../algorithms/fixed-window.js';
import { slidingLog } from '../algorithms/sliding-log.js';
import { tokenBucket } from '../algorithms/token-bucket.js';
import { createLimiter, type Limiter } from '../core/limiter.js';
import { rateLimitResponse } from '../http/headers.js';
import { memoryStore } from '../stores/memory.js';
import { redisStore } from '../stores/redis.js';
import type { Store } from '../stores/store.js';
import { RedisServerMissingError, startRedisServer, type RedisServer } from './redis-server.js';

/**
 * Sends `perSide` concurrent requests through every limiter 100 ms before a window edge of the
 * server's clock and as many 100 ms after it; returns how many each limiter admitted.
 * `serverClockOffsetMs` is the server's clock minus this process's (0 for the memory store).
 * A busy machine can delay a burst across the edge; such an attempt proves nothing, so it is
 * thrown away (the key reset) and the experiment runs again at a later edge.
 */
export async function aroundTheEdge(limiters: readonly Limiter[], key: string, serverClockOffsetMs: number, windowMs = 1000, perSide = 5): Promise<number[]> {
  const serverNow = () => Date.now() + serverClockOffsetMs;
  for (let attempt = 1; ; attempt++) {
    // The next edge at least 300 ms away, so the first burst can land before it.
    const edge = Math.ceil((serverNow() + 300) / windowMs) * windowMs;
    const admitted = limiters.map(() => 0);
    const burst = async () => {
      const sent = serverNow();
      await Promise.all(
        limiters.flatMap((limiter, i) =>
          Array.from({ length: perSide }, async () => {
            if ((await limiter.limit(key)).allowed) admitted[i] = (admitted[i] ?? 0) + 1;
          }),
        ),
      );
      return { sent, answered: serverNow() };
    };
    await sleep(edge - 100 - serverNow());
    const before = await burst();
    await sleep(edge + 100 - serverNow());
    const after = await burst();
    if (before.answered < edge && after.sent >= edge && after.answered < edge + windowMs - 200) return admitted;
    await Promise.all(limiters.map((limiter) => limiter.reset(key)));
    if (attempt === 5) throw new Error('the machine is too busy to land a burst on each side of a window edge');
  }
}

/** The hand-written limiter the demo warns about: INCR, then EXPIRE only when the count is 1. */
async function naiveLimit(redis: Redis, key: string, limit: number, crashBeforeExpire = false): Promise<boolean> {
  const count = await redis.incr(key);
  if (count === 1 && !crashBeforeExpire) await redis.expire(key, 60);
  return count <= limit;
}

async function classicBug(redis: Redis, key: string, print: (line: string) => void): Promise<void> {
  await naiveLimit(redis, key, 5, true);
  const allowed: boolean[] = [];
  for (let i = 0; i < 8; i++) allowed.push(await naiveLimit(redis, key, 5));
  print(`naive after crash: ttl = ${await redis.ttl(key)} | allowed: ${allowed.join(' ')}`);
  const first = await redis.call('EXPIRE', key, '60', 'NX');
  const again = await redis.call('EXPIRE', key, '60', 'NX');
  print(`EXPIRE NX on a key without TTL -> ${String(first)} , again -> ${String(again)}`);
  await redis.del(key);
}

async function sluiceLessons(store: Store, serverClockOffsetMs: number, print: (line: string) => void): Promise<void> {
  const prefix = `sluice-demo-${randomUUID()}`;
  const key = 'demo-client';
  const perMinute = createLimiter({ store, prefix, policy: fixedWindow({ limit: 5, window: '1m' }) });
  const edgeFixed = createLimiter({ store, prefix, policy: fixedWindow({ limit: 5, window: '1s' }) });
  const edgeLog = createLimiter({ store, prefix, policy: slidingLog({ limit: 5, window: '1s' }) });
  const bucket = createLimiter({ store, prefix, policy: tokenBucket({ capacity: 3, refillPerSecond: 1 }) });
  try {
    let last = await perMinute.limit(key);
    for (let i = 1; i < 7; i++) last = await perMinute.limit(key);
    const response = rateLimitResponse(last);
    print(`${response.status} ${response.statusText}`);
    print(`Retry-After: ${response.headers['Retry-After'] ?? '(none)'} | remaining ${last.remaining}`);

    const [fixed, log] = await aroundTheEdge([edgeFixed, edgeLog], key, serverClockOffsetMs);
    print(`fixed window: allowed in 200 ms around the edge: ${fixed} of 10 (limit is 5 per second)`);
    print(`sliding log : allowed in 200 ms around the edge: ${log} of 10`);

    const taken: number[] = [];
    for (let i = 0; i < 5; i++) taken.push((await bucket.limit(key)).allowed ? 1 : 0);
    await sleep(1100);
    taken.push((await bucket.limit(key)).allowed ? 1 : 0);
    print(`token bucket: 5 quick calls then one after 1.1 s -> ${taken.join(' ')}`);
  } finally {
    await Promise.all([perMinute, edgeFixed, edgeLog, bucket].map((limiter) => limiter.reset(key)));
  }
}

async function serverClockOffset(redis: Redis): Promise<number> {
  const before = Date.now();
  const [seconds, micros] = await redis.time();
  const after = Date.now();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) - (before + after) / 2;
}

export interface DemoOptions {
  /** A Redis to use; without it the demo starts a private redis-server. */
  redisUrl?: string | undefined;
  print?: (line: string) => void;
}

/** The lesson, live: where the hand-written limiter breaks and what sluice does instead. */
export async function runDemo({ redisUrl, print = console.log }: DemoOptions = {}): Promise<void> {
  let server: RedisServer | undefined;
  if (!redisUrl) {
    try {
      server = await startRedisServer();
    } catch (error) {
      if (!(error instanceof RedisServerMissingError)) throw error;
      print('(no redis-server on PATH and no REDIS_URL: the two Redis rows are skipped; the rest runs on the memory store)');
      await sluiceLessons(memoryStore(), 0, print);
      return;
    }
  }
  const { Redis } = await import('ioredis');
  const redis = new Redis(redisUrl ?? server?.url ?? '', { maxRetriesPerRequest: 1 });
  try {
    await classicBug(redis, `sluice-demo-naive-${randomUUID()}`, print);
    await sluiceLessons(redisStore(redis), await serverClockOffset(redis), print);
  } finally {
    await redis.quit();
    await server?.stop();
  }
}
