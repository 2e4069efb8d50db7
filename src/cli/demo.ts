import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import {
  concurrency,
  createLimiter,
  fixedWindow,
  gcra,
  memoryStore,
  rateLimitResponse,
  slidingLog,
  slidingWindow,
  tokenBucket,
  type Limiter,
  type Policy,
  type Store,
} from '../index.js';
import { connectRedis } from './connect.js';
import { RedisServerMissingError, startRedisServer, type RedisServer } from './redis-server.js';

/** One request of an edge run: when it was decided, relative to the window edge, and the answer. */
export interface EdgeRequest {
  /** Server-clock ms from the window edge (negative: before it), estimated as the middle of the round trip. */
  readonly atMs: number;
  readonly allowed: boolean;
}

/** A limiter's requests in an edge run, in the order their answers came back. */
export interface EdgeTimeline {
  readonly policy: Policy;
  readonly requests: readonly EdgeRequest[];
}

/**
 * Sends `perSide` concurrent requests through every limiter 100 ms before a window edge of the
 * server's clock and as many 100 ms after it; records when each was decided and the answer.
 * `serverClockOffsetMs` is the server's clock minus this process's (0 for the memory store).
 * A busy machine can delay a burst across the edge; such an attempt proves nothing, so it is
 * thrown away (the key reset) and the experiment runs again at a later edge.
 */
export async function recordAroundTheEdge(
  limiters: readonly Limiter[],
  key: string,
  serverClockOffsetMs: number,
  windowMs = 1000,
  perSide = 5,
): Promise<EdgeTimeline[]> {
  const serverNow = () => Date.now() + serverClockOffsetMs;
  for (let attempt = 1; ; attempt++) {
    // The next edge at least 300 ms away, so the first burst can land before it.
    const edge = Math.ceil((serverNow() + 300) / windowMs) * windowMs;
    const requests: EdgeRequest[][] = limiters.map(() => []);
    const burst = async () => {
      const sent = serverNow();
      await Promise.all(
        limiters.flatMap((limiter, i) =>
          Array.from({ length: perSide }, async () => {
            const sentAt = serverNow();
            const { allowed } = await limiter.limit(key);
            requests[i]?.push({ atMs: (sentAt + serverNow()) / 2 - edge, allowed });
          }),
        ),
      );
      return { sent, answered: serverNow() };
    };
    await sleep(edge - 100 - serverNow());
    const before = await burst();
    await sleep(edge + 100 - serverNow());
    const after = await burst();
    if (before.answered < edge && after.sent >= edge && after.answered < edge + windowMs - 200) {
      return limiters.map((limiter, i) => ({ policy: limiter.policy, requests: requests[i] ?? [] }));
    }
    await Promise.all(limiters.map((limiter) => limiter.reset(key)));
    if (attempt === 5) throw new Error('the machine is too busy to land a burst on each side of a window edge');
  }
}

export function admittedCount(timeline: EdgeTimeline): number {
  return timeline.requests.filter((request) => request.allowed).length;
}

/** How many requests each limiter admitted in an edge run (see recordAroundTheEdge). */
export async function aroundTheEdge(
  limiters: readonly Limiter[],
  key: string,
  serverClockOffsetMs: number,
  windowMs = 1000,
  perSide = 5,
): Promise<number[]> {
  return (await recordAroundTheEdge(limiters, key, serverClockOffsetMs, windowMs, perSide)).map(admittedCount);
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
  const ttl = await redis.ttl(key);
  // A key without a TTL (-1) that denies now denies forever: its count only grows.
  const fate = ttl === -1 && allowed.at(-1) === false ? ': this client is blocked forever' : '';
  print(`naive after crash: ttl = ${ttl} | allowed: ${allowed.join(' ')}${fate}`);
  try {
    const first = await redis.call('EXPIRE', key, '60', 'NX');
    const again = await redis.call('EXPIRE', key, '60', 'NX');
    print(`EXPIRE NX on a key without TTL -> ${String(first)} , again -> ${String(again)}`);
  } catch (error) {
    // Redis 6.2 has no EXPIRE NX (new in 7.0): it answers "wrong number of arguments".
    print(
      `EXPIRE NX on a key without TTL -> refused: EXPIRE NX needs Redis 7.0 or later (${(error as Error).message})`,
    );
  } finally {
    await redis.del(key);
  }
}

async function sluiceLessons(
  store: Store,
  serverClockOffsetMs: number,
  print: (line: string) => void,
): Promise<EdgeTimeline[]> {
  const prefix = `sluice-demo-${randomUUID()}`;
  const key = 'demo-client';
  // A key of its own: the edge's token bucket must not share its state with the other one's.
  const edgeKey = 'edge-client';
  const perMinute = createLimiter({ store, prefix, policy: fixedWindow({ limit: 5, window: '1m' }) });
  const edgeFixed = createLimiter({ store, prefix, policy: fixedWindow({ limit: 5, window: '1s' }) });
  const edgeLog = createLimiter({ store, prefix, policy: slidingLog({ limit: 5, window: '1s' }) });
  // Refilling a token every second, it has none to give 200 ms after a full burst, however the timing jitters.
  const edgeBucket = createLimiter({ store, prefix, policy: tokenBucket({ capacity: 5, refillPerSecond: 1 }) });
  const edgeGcra = createLimiter({ store, prefix, policy: gcra({ limit: 5, period: '1s' }) });
  const edgeWindow = createLimiter({ store, prefix, policy: slidingWindow({ limit: 5, window: '1s' }) });
  const bucket = createLimiter({ store, prefix, policy: tokenBucket({ capacity: 3, refillPerSecond: 1 }) });
  const slots = createLimiter({ store, prefix, policy: concurrency({ limit: 3, leaseMs: '10s' }) });
  try {
    let last = await perMinute.limit(key);
    for (let i = 1; i < 7; i++) last = await perMinute.limit(key);
    const response = rateLimitResponse(last);
    print(`${response.status} ${response.statusText}`);
    print(`Retry-After: ${response.headers['Retry-After'] ?? '(none)'} | remaining ${last.remaining}`);

    const edge = await recordAroundTheEdge(
      [edgeFixed, edgeLog, edgeBucket, edgeGcra, edgeWindow],
      edgeKey,
      serverClockOffsetMs,
    );
    const [fixed, log, , evenlySpaced, weighted] = edge.map(admittedCount);
    print(`fixed window: allowed in 200 ms around the edge: ${fixed} of 10 (limit is 5 per second)`);
    print(`sliding log : allowed in 200 ms around the edge: ${log} of 10`);

    const taken: number[] = [];
    for (let i = 0; i < 5; i++) taken.push((await bucket.limit(key)).allowed ? 1 : 0);
    await sleep(1100);
    taken.push((await bucket.limit(key)).allowed ? 1 : 0);
    print(`token bucket: capacity 3, 1 token a second: 5 quick calls then one after 1.1 s -> ${taken.join(' ')}`);
    // GCRA at 5 per second earns one request every 200 ms: the second burst gets it once 200 ms have passed.
    print(`gcra        : allowed in 200 ms around the edge: ${evenlySpaced} of 10`);
    print(`sliding window: allowed in 200 ms around the edge: ${weighted} of 10`);

    const leases = [];
    for (let i = 0; i < 5; i++) leases.push(await slots.acquire(key));
    await leases[0]?.release();
    const afterRelease = await slots.acquire(key);
    print(
      `concurrency : 3 slots, 5 overlapping calls -> ${leases.map((l) => (l.allowed ? 1 : 0)).join(' ')}, one released -> ${afterRelease.allowed ? 1 : 0}`,
    );
    await Promise.all([...leases, afterRelease].map((lease) => lease.release()));
    return edge;
  } finally {
    await Promise.all([
      ...[perMinute, bucket, slots].map((limiter) => limiter.reset(key)),
      ...[edgeFixed, edgeLog, edgeBucket, edgeGcra, edgeWindow].map((limiter) => limiter.reset(edgeKey)),
    ]);
  }
}

/**
 * The server's clock minus this process's, from the TIME reply that came back fastest of a few.
 * Its server time lies within its round trip, so the estimate (the trip's middle) is off by at most
 * half the trip; a single reply that waited for a busy event loop could be off by over 100 ms,
 * enough to put a burst meant for one side of a window edge on the other.
 */
export async function serverClockOffset(redis: Redis, samples = 5): Promise<number> {
  let best = { roundTripMs: Infinity, offsetMs: 0 };
  for (let i = 0; i < samples; i++) {
    const before = Date.now();
    const [seconds, micros] = await redis.time();
    const after = Date.now();
    if (after - before < best.roundTripMs) {
      const offsetMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) - (before + after) / 2;
      best = { roundTripMs: after - before, offsetMs };
    }
  }
  return best.offsetMs;
}

export interface DemoOptions {
  /** A Redis to use; without it the demo starts a private redis-server. */
  redisUrl?: string | undefined;
  print?: (line: string) => void;
}

/**
 * The lesson, live: where the hand-written limiter breaks and what sluice does instead.
 * Resolves with the window-edge run of each algorithm, for the HTML report.
 */
export async function runDemo({ redisUrl, print = console.log }: DemoOptions = {}): Promise<EdgeTimeline[]> {
  let server: RedisServer | undefined;
  if (!redisUrl) {
    try {
      server = await startRedisServer();
    } catch (error) {
      if (!(error instanceof RedisServerMissingError)) throw error;
      print(
        '(no redis-server on PATH and no REDIS_URL: the two Redis rows are skipped; the rest runs on the memory store)',
      );
      return sluiceLessons(memoryStore(), 0, print);
    }
  }
  try {
    const redis = await connectRedis(redisUrl ?? server?.url ?? '', 'the Redis URL');
    try {
      await classicBug(redis.client, `sluice-demo-naive-${randomUUID()}`, print);
      return await sluiceLessons(redis.store, await serverClockOffset(redis.client), print);
    } finally {
      await redis.close();
    }
  } finally {
    await server?.stop();
  }
}
