import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import type { RedisServer } from '../../src/cli/redis-server.js';
import {
  createLimiter,
  fixedWindow,
  redisStore,
  StoreTimeoutError,
  type Limiter,
  type RedisClient,
} from '../../src/index.js';
import { clientKinds } from '../support/clients.js';
import { startProxy, type Proxy } from '../support/proxy.js';
import { uniquePrefix } from '../support/redis.js';
import { awayFromWindowEnd } from '../support/window-edge.js';
import { startTestServer, testServer } from '../support/servers.js';

const HOUR = 3_600_000;
const LIMIT = 1_000;
const TIMEOUT_MS = 100;

/** A fault that keeps commands from running until it ends; they then run, late, in the order sent. */
interface Fault {
  start(): void | Promise<void>;
  end(): void | Promise<void>;
}

describe(`late calls on ${testServer.name}: a call answered by the failure policy counts nothing when it reaches Redis later`, () => {
  let server: RedisServer;
  let proxy: Proxy;
  let admin: Redis;
  // Each scenario counts in one hour-long window across a fault.
  beforeEach(() => awayFromWindowEnd(HOUR, 30_000));
  before(async () => {
    server = await startTestServer(['--enable-debug-command', 'yes']);
    proxy = await startProxy(server.port);
    admin = new Redis(server.url);
  });
  after(async () => {
    admin.disconnect();
    await proxy.stop();
    await server.stop();
  });

  const faults: Record<string, () => Fault> = {
    'a network partition': () => ({
      start: () => proxy.blackHole(),
      end: () => proxy.heal(),
    }),
    'CLIENT PAUSE': () => ({
      // WRITE mode holds scripts (they may write) yet lets CLIENT UNPAUSE through.
      start: async () => void (await admin.call('CLIENT', 'PAUSE', '60000', 'WRITE')),
      end: async () => void (await admin.call('CLIENT', 'UNPAUSE')),
    }),
    'DEBUG SLEEP': () => {
      let sleeping: Promise<unknown> = Promise.resolve();
      return {
        async start() {
          // Long enough for every call the test makes during the fault, on a loaded machine too.
          sleeping = admin.call('DEBUG', 'SLEEP', '3');
          // Once Redis sleeps it answers nothing: a PING on another connection tells it has begun.
          const probe = new Redis(server.url);
          const began = await Promise.race([
            probe.ping().then(() => false),
            new Promise<boolean>((done) => setTimeout(() => done(true), 200)),
          ]);
          probe.disconnect();
          assert.ok(began, 'DEBUG SLEEP did not hold the server');
        },
        end: async () => void (await sleeping),
      };
    },
  };

  for (const [faultName, makeFault] of Object.entries(faults)) {
    for (const [clientName, connect] of Object.entries(clientKinds)) {
      it(`${faultName}, ${clientName}: limit, refund, reset, block and settle sent during the fault change nothing`, async () => {
        const { client, close } = await connect(proxy.port);
        try {
          const { limiter, checker } = limiters(client);
          // Before the fault: state for each call to change, and replies that tell the server's clock.
          for (const key of ['limits', 'refund', 'refund', 'reset', 'reset', 'block']) await checker.limit(key);
          const reservation = await limiter.reserve('settle', { cost: 5 });
          const fault = makeFault();
          await fault.start();
          // Concurrent calls go as one batch; the calls after them each alone.
          const answered = await Promise.all(Array.from({ length: 20 }, () => limiter.limit('limits')));
          for (let i = 0; i < 3; i++) answered.push(await limiter.limit('limits'));
          assert.deepEqual(new Set(answered.map((d) => `${d.allowed} ${d.reason}`)), new Set(['false timeout']));
          await assert.rejects(limiter.refund('refund'), StoreTimeoutError);
          await assert.rejects(limiter.reset('reset'), StoreTimeoutError);
          await assert.rejects(limiter.block('block', HOUR), StoreTimeoutError);
          await assert.rejects(reservation.settle(1), StoreTimeoutError);
          // Reserved by the failure policy ('deny'): nothing was charged, so there is nothing to settle.
          const unanswered = await limiter.reserve('settle', { cost: 5 });
          assert.deepEqual([unanswered.allowed, unanswered.reason], [false, 'timeout']);
          assert.equal(await unanswered.settle(100), false);
          await fault.end();
          // Sent after the late calls on the same connection, so decided after them.
          assert.deepEqual(await remainingOf(checker, ['limits', 'refund', 'reset', 'block', 'settle']), {
            limits: LIMIT - 2,
            refund: LIMIT - 3,
            reset: LIMIT - 3,
            block: LIMIT - 2,
            settle: LIMIT - 6,
          });
          // The settle that timed out changed nothing, but a settle that fails may have run (its
          // reply late on a starved machine): retried, it gives nothing back again, once, and the
          // reservation stays charged at its estimate.
          assert.equal(await reservation.settle(1), true);
          assert.equal(await reservation.settle(1), false);
          assert.equal((await checker.limit('settle')).remaining, LIMIT - 7);
        } finally {
          await close();
        }
      });
    }
  }

  it('a pause ending around the deadline: no call run after it counts, and one run before it is answered by Redis', async (t) => {
    const client = new Redis(server.port, '127.0.0.1');
    try {
      const { limiter, checker } = limiters(client);
      let counted = (await checker.limit('k')).remaining;
      const outcomes = {
        'answered by Redis': 0,
        'answered by the policy, not counted': 0,
        'answered by the policy, counted, run by the deadline or near it': 0,
        'answered by the policy, counted, run after the deadline': 0,
      };
      // Pauses from 40 ms short of the timeout (room for a loaded machine) to 20 ms past it.
      for (let pauseMs = TIMEOUT_MS - 40; pauseMs <= TIMEOUT_MS + 20; pauseMs++) {
        const sent = performance.now();
        await admin.call('CLIENT', 'PAUSE', String(pauseMs), 'WRITE');
        const pausedUntil = performance.now() + pauseMs;
        const asked = performance.now();
        const decision = await limiter.limit('k');
        // The next call, decided by Redis once the pause is over, shows whether this one counted.
        await sleep(pausedUntil + 5 - performance.now());
        const next = await checker.limit('k');
        assert.equal(next.reason, undefined);
        const countedBefore = counted - next.remaining - 1;
        counted = next.remaining;
        if (decision.reason === undefined) outcomes['answered by Redis']++;
        else if (countedBefore !== 1) outcomes['answered by the policy, not counted']++;
        // The pause began after `sent`, so it ended after `sent + pauseMs`: past the deadline (asked +
        // the timeout, less 1 ms) by a ms of rounding, the script surely ran after it.
        else if (sent + pauseMs >= asked + TIMEOUT_MS + 1)
          outcomes['answered by the policy, counted, run after the deadline']++;
        else outcomes['answered by the policy, counted, run by the deadline or near it']++;
      }
      t.diagnostic(JSON.stringify(outcomes));
      // The deadline's promise: a script run after it counts nothing.
      assert.equal(outcomes['answered by the policy, counted, run after the deadline'], 0);
      // Run by it or near it, a call is counted and answered by the policy only if its reply comes back after
      // the timeout: a window, not a guarantee (docs/reliability.md), which a machine starved by the
      // whole suite opened once in CI. Without the deadline about half of these calls were.
      assert.ok(
        outcomes['answered by the policy, counted, run by the deadline or near it'] <= 1,
        JSON.stringify(outcomes),
      );
      assert.ok(
        outcomes['answered by Redis'] > 0 && outcomes['answered by the policy, not counted'] > 0,
        'the pauses did not straddle the deadline',
      );
    } finally {
      client.disconnect();
    }
  });

  // Redis answers in time, but the reply waits in the socket while the event loop is busy past the
  // deadline: in a callback of the poll phase (a request's handler) or of the check phase
  // (setImmediate). Node runs due timers before it next reads a socket, so the guard's timer is
  // the first to learn that the deadline passed.
  const busyPhases: Record<string, (work: () => void) => void> = {
    'an I/O callback': (work) => void admin.ping().then(work),
    setImmediate: (work) => void setImmediate(work),
  };
  for (const [phase, inPhase] of Object.entries(busyPhases)) {
    it(`an event loop busy in ${phase} past the deadline while the reply waits: a counted call is answered by Redis`, async (t) => {
      const client = new Redis(server.port, '127.0.0.1');
      try {
        const { limiter, checker } = limiters(client);
        const before = (await checker.limit('k')).remaining;
        const decisions = [];
        for (let call = 0; call < 5; call++) {
          const asked = performance.now();
          const decision = limiter.limit('k');
          inPhase(() => {
            while (performance.now() < asked + TIMEOUT_MS * 1.5);
          });
          decisions.push(await decision);
        }
        // Redis answers in time, so each call should be answered by it; one that a loaded machine
        // delays past its deadline may be refused (LATE) instead, but never answered by the policy
        // and counted.
        const counted = before - (await checker.limit('k')).remaining - 1;
        const answeredByRedis = decisions.filter((d) => d.reason === undefined).length;
        t.diagnostic(`${counted} of 5 calls counted, ${answeredByRedis} answered by Redis`);
        assert.equal(answeredByRedis, counted, `${counted} of 5 calls counted, ${answeredByRedis} answered by Redis`);
        assert.ok(counted > 0, 'Redis ran no call in time: no reply waited in the socket');
      } finally {
        client.disconnect();
      }
    });
  }
});

/**
 * The limiter under test, and one on the same store and keys that waits for Redis as long as a
 * loaded machine may need, to read the state afterwards.
 */
function limiters(client: RedisClient): { limiter: Limiter; checker: Limiter } {
  const options = {
    store: redisStore(client),
    policy: fixedWindow({ limit: LIMIT, window: HOUR }),
    prefix: uniquePrefix(),
    onStoreError: 'deny',
  } as const;
  return {
    limiter: createLimiter({ ...options, timeout: TIMEOUT_MS }),
    checker: createLimiter({ ...options, timeout: '30s' }),
  };
}

/** Each key's remaining after one more call, decided by Redis. */
async function remainingOf(limiter: Limiter, keys: readonly string[]): Promise<Record<string, number>> {
  const decisions = await Promise.all(keys.map((key) => limiter.limit(key)));
  return Object.fromEntries(
    keys.map((key, i): [string, number] => {
      const decision = decisions[i] ?? assert.fail(`no decision for ${key}`);
      assert.equal(decision.reason, undefined, `${key} was not decided by Redis`);
      assert.equal(decision.blockedForMs, undefined, `${key} is blocked`);
      return [key, decision.remaining];
    }),
  );
}
