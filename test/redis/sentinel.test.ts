import assert from 'node:assert/strict';
import { once } from 'node:events';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { after, before, beforeEach, describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createSentinel } from 'redis';
import {
  createLimiter,
  fixedWindow,
  redisStore,
  type Decision,
  type Limiter,
  type RedisClient,
} from '../../src/index.js';
import { waitFor } from '../support/cluster.js';
import { keysWithTtl, uniquePrefix } from '../support/redis.js';
import { MASTER_NAME, startSentinelGroup, type SentinelGroup } from '../support/sentinel.js';
import { policyKey } from '../support/keys.js';
import { awayFromWindowEnd } from '../support/window-edge.js';

const HOUR = 3_600_000;
const TIMEOUT_MS = 500;
// A call answered this much after its timeout, beyond the longest the event loop was held up during
// the run (see lagged), is late: a call waiting for the client to reconnect takes seconds.
const LATE_MS = 250;

interface Call {
  readonly ms: number;
  readonly decision: Decision;
}

/**
 * Calls `limiter.limit` from `workers` loops at once, recording each call's time and decision,
 * until `done` holds after a call. Each call starts on a turn of the event loop of its own, as a
 * request would: a client failing at once would otherwise starve every timer.
 */
async function load(limiter: Limiter, workers: number, done: (calls: readonly Call[]) => boolean): Promise<Call[]> {
  const calls: Call[] = [];
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (!done(calls)) {
        const started = performance.now();
        const decision = await limiter.limit('hot');
        calls.push({ ms: performance.now() - started, decision });
        await nextTurn();
      }
    }),
  );
  return calls;
}

interface SentinelClient {
  readonly name: string;
  connect(group: SentinelGroup): Promise<{ client: RedisClient; close(): Promise<unknown> }>;
}

// Each set up as docs/reliability.md advises for Sentinel: no offline queue, so a call during the
// failover fails at once instead of waiting; reconnecting every 100 ms.
const clients: SentinelClient[] = [
  {
    name: 'ioredis',
    async connect(group) {
      const client = new Redis({
        sentinels: [...group.sentinelNodes],
        name: MASTER_NAME,
        enableOfflineQueue: false,
        maxRetriesPerRequest: 1,
        connectTimeout: 1_000,
        sentinelRetryStrategy: () => 100,
        retryStrategy: () => 100,
      });
      client.on('error', () => {});
      await once(client, 'ready');
      return { client, close: () => client.quit() };
    },
  },
  {
    name: 'node-redis',
    async connect(group) {
      const socket = { connectTimeout: 1_000, reconnectStrategy: () => 100 };
      const client = createSentinel({
        name: MASTER_NAME,
        sentinelRootNodes: [...group.sentinelNodes],
        nodeClientOptions: { disableOfflineQueue: true, socket },
        sentinelClientOptions: { socket },
      });
      client.on('error', () => {});
      await client.connect();
      return { client, close: () => client.close() };
    },
  },
];

const failovers: {
  name: string;
  start(group: SentinelGroup, master: number): Promise<void>;
  heal(group: SentinelGroup, master: number): Promise<void>;
}[] = [
  {
    name: 'SENTINEL FAILOVER',
    async start(group) {
      const sentinel = new Redis(group.sentinelNodes[0]?.port ?? 0, '127.0.0.1');
      try {
        assert.equal(await sentinel.call('SENTINEL', 'FAILOVER', MASTER_NAME), 'OK');
      } finally {
        sentinel.disconnect();
      }
    },
    async heal() {},
  },
  {
    name: 'the master killed',
    async start(group, master) {
      await group.servers.find((s) => s.port === master)?.kill();
    },
    // Back, it is a replica of the new master: the Sentinels tell it so.
    async heal(group, master) {
      await group.servers.find((s) => s.port === master)?.restart();
    },
  },
];

describe('Sentinel: a master, a replica and three sentinels', () => {
  let group: SentinelGroup;
  before(async () => {
    group = await startSentinelGroup();
  });
  after(async () => {
    await group?.stop();
  });
  // A failover takes up to half a minute, counted in one hour-long window.
  beforeEach(() => awayFromWindowEnd(HOUR, 60_000));

  for (const failover of failovers) {
    it(`${failover.name} under load, through both clients: every call answers within the timeout, by Redis or the failure policy; calls return to the new master; every key has a TTL`, async (t) => {
      const master = await group.settled();
      const connected = await Promise.all(clients.map((c) => c.connect(group)));
      try {
        const prefix = uniquePrefix();
        const cases = connected.map(({ client }, i) => {
          const seen = { calls: 0, failures: 0 };
          const limiter = createLimiter({
            store: redisStore(client),
            prefix: `${prefix}-${i}`,
            policy: fixedWindow({ limit: 1_000_000, window: HOUR }),
            timeout: TIMEOUT_MS,
            onStoreError: 'deny',
            onOutage: () => seen.failures++,
          });
          return { name: clients[i]?.name ?? '', client, limiter, seen };
        });
        let switched = false;
        // Until the Sentinels have switched and each client's last 100 calls were decided by Redis
        // (a client may fail a call or two more while it settles on the new master), or 20 s have
        // passed since the switch (which the assertions below then report).
        let giveUpAt = Infinity;
        // How late this process's event loop ran: a timer cannot fire, nor a call be answered, sooner.
        const lagged = monitorEventLoopDelay({ resolution: 10 });
        lagged.enable();
        const loads = cases.map(({ limiter, seen }) => {
          let sinceSwitch = 0;
          return load(limiter, 8, (calls) => {
            seen.calls = calls.length;
            if (switched) sinceSwitch = calls.at(-1)?.decision.reason === undefined ? sinceSwitch + 1 : 0;
            return sinceSwitch >= 100 || performance.now() > giveUpAt;
          });
        });
        await waitFor('each client has made 100 calls', () => cases.every(({ seen }) => seen.calls >= 100));
        const startedAt = performance.now();
        await failover.start(group, master);
        let promoted = master;
        await waitFor(
          'the Sentinels promote the other server',
          async () => (promoted = await group.master()) !== master,
        );
        const switchMs = performance.now() - startedAt;
        switched = true;
        giveUpAt = performance.now() + 20_000;
        const calls = await Promise.all(loads);
        lagged.disable();
        const lagMs = lagged.max / 1e6;
        await failover.heal(group, master);
        assert.equal(await group.settled(), promoted);

        const newMaster = new Redis(promoted, '127.0.0.1');
        try {
          assert.equal((await newMaster.role())[0], 'master');
          for (const [i, { name, client, limiter, seen }] of cases.entries()) {
            const made = calls[i] ?? [];
            const byPolicy = made.filter((c) => c.decision.reason !== undefined);
            assert.ok(
              made.every(
                (c) =>
                  c.decision.reason === undefined || (c.decision.allowed === false && c.decision.error !== undefined),
              ),
              `${name}: a failed call is denied, with its error`,
            );
            assert.equal(byPolicy.length, seen.failures, `${name}: every failure reported once`);
            assert.equal(
              made.slice(-100).filter((c) => c.decision.reason !== undefined).length,
              0,
              `${name}: calls did not return to Redis`,
            );
            const slowest = Math.max(...made.map((c) => c.ms));
            assert.ok(
              slowest <= TIMEOUT_MS + LATE_MS + lagMs,
              `${name}: a call took ${slowest} ms; the event loop ran up to ${Math.round(lagMs)} ms late`,
            );
            t.diagnostic(
              `${name}: ${made.length} calls, ${byPolicy.length} answered by the failure policy (${byPolicy.filter((c) => c.decision.reason === 'timeout').length} after the timeout), slowest ${Math.round(slowest)} ms (event loop up to ${Math.round(lagMs)} ms late); Sentinels switched after ${Math.round(switchMs)} ms`,
            );

            // Exact counting goes on, on the new master, where every key has a TTL.
            const fresh = createLimiter({
              store: redisStore(client),
              prefix: limiter.prefix,
              policy: fixedWindow({ limit: 5, window: HOUR }),
            });
            const decisions = await Promise.all(Array.from({ length: 10 }, () => fresh.limit('fresh')));
            assert.deepEqual(
              [decisions.filter((d) => d.allowed).length, decisions.filter((d) => d.reason !== undefined).length],
              [5, 0],
            );
            const ttls = await keysWithTtl(newMaster, limiter.prefix);
            assert.deepEqual([...ttls.keys()].sort(), [policyKey(fresh, 'fresh'), policyKey(fresh, 'hot')]);
            for (const [key, ttl] of ttls) assert.ok(ttl > 0, `${key} has PTTL ${ttl}`);
          }
        } finally {
          newMaster.disconnect();
        }
      } finally {
        await Promise.all(connected.map((c) => c.close()));
      }
    });
  }
});
