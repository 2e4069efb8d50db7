import type { Cluster, Redis } from 'ioredis';

/** Which of a call's keys a kind of junk suits: any of them, or only the block key. */
export type KeyRole = 'policy' | 'block' | 'strikes';

/**
 * State sluice never writes, written by hand (without a TTL) into one of its keys: the wrong Redis
 * type, numbers it does not write, and hashes and sorted sets with garbage in them. `nowMs` is the
 * server's time and `windowMs` the policy's window, for junk that looks almost right.
 */
export const junkKinds: readonly {
  readonly name: string;
  readonly roles?: readonly KeyRole[];
  write(redis: Redis | Cluster, key: string, nowMs: number, windowMs: number): Promise<unknown>;
}[] = [
  { name: 'a list', write: (redis, key) => redis.rpush(key, '1') },
  { name: "'2.5'", write: (redis, key) => redis.set(key, '2.5') },
  { name: "'-5'", write: (redis, key) => redis.set(key, '-5') },
  { name: "'abc'", write: (redis, key) => redis.set(key, 'abc') },
  { name: "'1e300'", write: (redis, key) => redis.set(key, '1e300') },
  { name: '2^63', write: (redis, key) => redis.set(key, '9223372036854775808') },
  {
    name: 'a hash with missing and garbage fields',
    write: (redis, key) => redis.hset(key, { s: 'abc', c: '-5', x: '1' }),
  },
  {
    name: "a hash of this window's start with garbage counts",
    write: (redis, key, nowMs, windowMs) =>
      redis.hset(key, { s: String(nowMs - (nowMs % windowMs)), p: 'abc', c: '2.5' }),
  },
  {
    name: 'a sorted set with garbage members and scores',
    write: (redis, key) => redis.zadd(key, '+inf', 'abc', '1.5', 'x', '-5', 'y'),
  },
  {
    name: 'a sorted set whose newest member is not an id',
    write: (redis, key, nowMs) => redis.zadd(key, String(nowMs), 'abc'),
  },
  {
    name: 'a sorted set whose newest score is a fraction',
    write: (redis, key, nowMs) => redis.zadd(key, String(nowMs + 0.5), '1'),
  },
  {
    name: 'a block ending more than a year ahead',
    roles: ['block'],
    write: (redis, key, nowMs) => redis.set(key, String(nowMs + 400 * 86_400_000)),
  },
];

/** The server's time in ms. */
export async function serverNow(redis: Redis | Cluster): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}
