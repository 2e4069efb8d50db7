/**
 * A child process of the lease exactness test: connects to Redis (a cluster when the url lists
 * several nodes), says "ready", waits for "go" on stdin so that every process starts at once,
 * makes one limit() call on one key (taking a lease), waits `pause` ms with it (longer than a
 * window, and than the bucket takes to refill: what the lease holds must not outlive its time),
 * then makes `calls` limit() calls on that key, `concurrency` at a time, through a limiter with a
 * quota lease, and prints as JSON when it started and ended (Date.now(), the clock Redis's TIME
 * reads) and, for every admitted request, when it was asked and when the store charged its units
 * (its decision's decidedAt).
 *
 * argv: redis url(s, comma-separated), prefix, algorithm, limit, window ms, calls, concurrency,
 * units, lease ms, pause ms, 'return' or 'forget' (the store never receives a give-back: every lease's
 * unused units stay spent, as when a process dies holding it)
 */
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, Redis } from 'ioredis';
import { createLimiter, redisStore, type Store } from '../../src/index.js';
import { algorithms } from './algorithms.js';

const [urls = '', prefix = '', name, limit, windowMs, calls, concurrency, units, leaseMs, pauseMs, mode] =
  process.argv.slice(2);
const nodes = urls.split(',');
const redis =
  nodes.length > 1
    ? new Cluster(nodes.map((url) => ({ host: new URL(url).hostname, port: Number(new URL(url).port) })))
    : new Redis(urls);
await redis.ping();
const redisBacked = redisStore(redis);
// A store that drops every give-back before it reaches Redis: the process forgets its leases.
const store: Store =
  mode === 'forget'
    ? {
        ...redisBacked,
        run: (script, keys, args, deadline) =>
          args[0] === 'refund' ? Promise.resolve([0, 1, 0]) : redisBacked.run(script, keys, args, deadline),
      }
    : redisBacked;
const algorithm = algorithms.find((a) => a.name === name);
if (algorithm === undefined) throw new Error(`no algorithm ${name}`);
const limiter = createLimiter({
  store,
  policy: algorithm.policy(Number(limit), Number(windowMs)),
  prefix,
  timeout: '30s',
  // A store failure then shows as a shortfall, never as an admission.
  onStoreError: 'deny',
  lease: { units: Number(units), ms: Number(leaseMs) },
});

process.stdout.write('ready\n');
await once(process.stdin, 'data');
const admitted: [number, number][] = [];
const one = async () => {
  const askedAt = Date.now();
  const decision = await limiter.limit('hot');
  if (decision.allowed) admitted.push([askedAt, decision.decidedAt ?? -1]);
};
await one();
await sleep(Number(pauseMs));
const startedAt = Date.now();
for (let sent = 0; sent < Number(calls); sent += Number(concurrency)) {
  await Promise.all(Array.from({ length: Number(concurrency) }, one));
}
const endedAt = Date.now();
await limiter.close();
process.stdout.write(`${JSON.stringify({ startedAt, endedAt, admitted })}\n`);
await redis.quit();
process.stdin.destroy();
