import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { after, before, beforeEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { startRedisServer, type RedisServer } from '../../src/cli/redis-server.js';
import {
  createLimiter,
  fixedWindow,
  memoryStore,
  redisStore,
  type Decision,
  type Limiter,
  type LimiterOptions,
  type StoreRecovery,
} from '../../src/index.js';
import { algorithms } from '../support/algorithms.js';
import { keysWithTtl, uniquePrefix } from '../support/redis.js';
import { awayFromWindowEnd } from '../support/window-edge.js';

const HOUR = 3_600_000;
// Long enough that the paused call's 500 ms timeout fires first, however slow the machine; the test
// ends the pause itself once it has.
const PAUSE_MS = 30_000;

/**
 * Runs test/support/observed-request.ts (one request through an observed limiter behind
 * sluice/node) against `url`: its stdout, and each message it printed to stderr (Node's hint
 * after a process's first warning, on how to trace it, is no message of sluice's).
 */
async function oneObservedRequest(url: string, env: Record<string, string> = {}) {
  const { stdout, stderr } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', 'test/support/observed-request.ts'],
    { env: { ...process.env, REDIS_URL: url, ...env } },
  );
  const messages = stderr.split('\n').filter((line) => line !== '' && !line.startsWith('(Use `node --trace-warnings'));
  return { stdout: stdout.trim(), messages };
}

/** Calls `limiter.limit` until a decision comes from Redis again (no `reason`), for at most 15 s. */
async function untilBackOnRedis(limiter: Limiter, key: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while ((await limiter.limit(key)).reason !== undefined) {
    assert.ok(Date.now() < deadline, 'calls did not return to Redis within 15 s of the restart');
    await sleep(50);
  }
}

describe('outage: a slow or dead redis-server', () => {
  let server: RedisServer;
  before(async () => {
    server = await startRedisServer();
  });
  after(async () => {
    await server.stop();
  });
  // Each scenario counts in one hour-long window across a pause or a restart.
  beforeEach(() => awayFromWindowEnd(HOUR, 30_000));

  it('answers within the timeout while Redis is paused, then decides in Redis again; the late call counts nothing', async () => {
    const client = new Redis(server.url);
    const admin = new Redis(server.url);
    try {
      // Two limiters on the same keys: the 500 ms timeout meets only the call made while Redis is
      // paused, which no reply can beat; the calls around it wait as long as Redis takes, so that a
      // loaded machine's slow reply is not counted as a failure (500 ms once was not enough).
      const options = {
        store: redisStore(client),
        policy: fixedWindow({ limit: 5, window: HOUR }),
        prefix: uniquePrefix(),
        onStoreError: 'deny',
      } as const;
      const patient = createLimiter({ ...options, timeout: '1m' });
      const hasty = createLimiter({ ...options, timeout: '500ms' });
      assert.equal((await patient.limit('k')).remaining, 4);
      // WRITE mode holds scripts (they may write) yet lets CLIENT UNPAUSE through.
      await admin.call('CLIENT', 'PAUSE', String(PAUSE_MS), 'WRITE');
      const started = performance.now();
      const paused = await hasty.limit('k');
      const waitedMs = performance.now() - started;
      assert.equal(paused.reason, 'timeout');
      assert.equal(paused.allowed, false);
      assert.ok(waitedMs < PAUSE_MS, `answered after ${waitedMs} ms, not before Redis`);
      await admin.call('CLIENT', 'UNPAUSE');
      // The timed-out call was already on its way: Redis runs it after the pause, before this one,
      // and refuses it, since its deadline had passed.
      const back = await patient.limit('k');
      assert.deepEqual([back.allowed, back.remaining, back.reason], [true, 3, undefined]);
    } finally {
      await admin.call('CLIENT', 'UNPAUSE');
      client.disconnect();
      admin.disconnect();
    }
  });

  for (const [told, onOutage, printed] of [
    [
      'no one',
      undefined,
      /^\(node:\d+\) \[SLUICE_STORE_FAILED\] Warning: sluice: store failed: no reply within 200 ms \(timeout\); answering 'allow' until it recovers$/,
    ],
    ["the limiter's onOutage", 'log', /^rate limiter store down: sluice: store failed: no reply within 200 ms$/],
  ] as const) {
    it(`one request through an observed limiter behind sluice/node while Redis is paused prints one message (told ${told})`, async () => {
      const admin = new Redis(server.url);
      try {
        await admin.call('CLIENT', 'PAUSE', '10000', 'WRITE');
        const { stdout, messages } = await oneObservedRequest(server.url, onOutage ? { ON_OUTAGE: onOutage } : {});
        assert.equal(stdout, '200', 'failing open');
        assert.equal(messages.length, 1, messages.join('\n'));
        assert.match(messages[0] ?? '', printed);
      } finally {
        await admin.call('CLIENT', 'UNPAUSE');
        admin.disconnect();
      }
    });
  }

  it('killed mid-load: follows the failure policy while down, returns to Redis after a restart, no key without a TTL', async () => {
    // ioredis as it comes (offline queue on: calls wait for the reconnect, so they time out), and
    // ioredis and node-redis set up as docs/reliability.md advises (offline queue off: they fail at once).
    const reconnectEvery100ms = () => 100;
    const clients = {
      queueing: new Redis(server.url, { retryStrategy: reconnectEvery100ms }),
      failFast: new Redis(server.url, {
        retryStrategy: reconnectEvery100ms,
        enableOfflineQueue: false,
        maxRetriesPerRequest: 1,
        connectTimeout: 1_000,
      }),
      nodeRedis: createClient({
        url: server.url,
        disableOfflineQueue: true,
        socket: { connectTimeout: 1_000, reconnectStrategy: reconnectEvery100ms },
      }),
    };
    const clientErrors: unknown[] = [];
    for (const client of Object.values(clients)) client.on('error', (error: unknown) => clientErrors.push(error));
    const prefix = uniquePrefix();
    const recoveries: StoreRecovery[] = [];
    const onRecovery = (r: StoreRecovery) => recoveries.push(r);
    try {
      // Without an offline queue, a command sent before the connection is ready fails: wait for it.
      await Promise.all([clients.nodeRedis.connect(), once(clients.failFast, 'ready')]);
      // The limiters under test, with a 500 ms timeout, meet Redis only while it is down and on their
      // way back; each has a patient twin on the same keys for the calls that Redis must answer, so
      // that a loaded machine's slow reply is not counted as a failure (500 ms once was not enough).
      const limitersWith = (more: Pick<LimiterOptions, 'timeout' | 'onRecovery'>) =>
        algorithms.flatMap((algorithm) => {
          const options = { policy: algorithm.policy(1000, HOUR), prefix, ...more } as const;
          return [
            createLimiter({
              ...options,
              store: redisStore(clients.queueing),
              onStoreError: createLimiter({ store: memoryStore(), policy: algorithm.policy(3, HOUR) }),
            }),
            createLimiter({
              ...options,
              store: redisStore(clients.failFast),
              prefix: `${prefix}-f`,
              onStoreError: 'deny',
            }),
            createLimiter({
              ...options,
              store: redisStore(clients.nodeRedis),
              prefix: `${prefix}-n`,
              onStoreError: 'deny',
            }),
          ];
        });
      const limiters = limitersWith({ timeout: '500ms', onRecovery });
      const patient = limitersWith({ timeout: '1m' });
      const batch = (key: string, on = limiters) => Promise.all(on.map((limiter) => limiter.limit(key)));
      const keys = Array.from({ length: 20 }, (_, i) => `user:${i}`);

      for (const key of keys) assert.ok((await batch(key, patient)).every((d) => d.allowed && d.reason === undefined));
      const inFlight = Promise.all(keys.map((key) => batch(key)));
      await server.kill();
      const whenKilled = (await inFlight).flat();
      assert.ok(whenKilled.every((d) => d.reason === undefined || d.error !== undefined));

      const down: Decision[][] = [];
      for (let i = 0; i < 4; i++) down.push(await batch('while-down'));
      // The queueing client's limiters asked their fallback (limit 3), after a timeout or, once the
      // client gives up on its queue, an error; the fail-fast ones failed at once and denied.
      const failed = (d: Decision) =>
        d.reason === 'timeout' || d.reason === 'store-error' ? 'failed' : 'decided by Redis';
      assert.deepEqual(
        down.map((decisions) =>
          decisions.map((d, i) => `${d.allowed ? 1 : 0}/${d.limit} ${i % 3 === 0 ? failed(d) : d.reason}`),
        ),
        [1, 1, 1, 0].map((allowed) =>
          algorithms.flatMap(() => [`${allowed}/3 failed`, '0/1000 store-error', '0/1000 store-error']),
        ),
      );

      await server.restart();
      for (const limiter of limiters) await untilBackOnRedis(limiter, 'after');
      const back = (await Promise.all(keys.map((key) => batch(key, patient)))).flat();
      assert.ok(back.every((d) => d.allowed && d.reason === undefined && d.limit === 1000));
      assert.equal(recoveries.length, limiters.length, 'each limiter reports its recovery once');
      assert.ok(clientErrors.length > 0, 'the clients saw the connection drop');

      const raw = new Redis(server.url);
      try {
        for (const p of [prefix, `${prefix}-f`, `${prefix}-n`]) {
          const ttls = await keysWithTtl(raw, p);
          assert.ok(ttls.size >= 3 * 20, `${ttls.size} keys under ${p}`);
          for (const [key, ttl] of ttls) assert.ok(ttl > 0, `${key} has PTTL ${ttl}`);
        }
      } finally {
        raw.disconnect();
      }
    } finally {
      clients.queueing.disconnect();
      clients.failFast.disconnect();
      clients.nodeRedis.destroy();
    }
  });
});
