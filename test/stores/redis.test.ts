import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { startRedisServer } from '../../src/cli/redis-server.js';
import { callKeys } from '../../src/core/keys.js';
import { compiled, scriptArgs } from '../../src/engine/driver.js';
import { createLimiter, fixedWindow, redisStore, slidingLog, type Decision } from '../../src/index.js';
import { enginePolicy } from '../../src/engine/algorithm.js';

type Command = (...args: string[]) => Promise<unknown>;

/** An ioredis client seen through only the methods given, each call's name recorded. */
function through(redis: Redis, methods: readonly string[], called: string[]): Record<string, Command> {
  const client = redis as unknown as Record<string, Command>;
  return Object.fromEntries(
    methods.map((name) => [
      name,
      (...args: string[]) => {
        called.push(name);
        return (client[name] as Command).apply(redis, args);
      },
    ]),
  );
}

describe('a batch of decisions', () => {
  const forms = [
    {
      form: 'packed (a client that replies with Buffers)',
      methods: ['evalsha', 'eval', 'evalshaBuffer', 'evalBuffer', 'del'],
      batchCalls: ['evalshaBuffer', 'evalBuffer'],
    },
    {
      form: 'as a RESP array (a client that cannot)',
      methods: ['evalsha', 'eval', 'del'],
      batchCalls: ['evalsha', 'eval'],
    },
  ];
  for (const { form, methods, batchCalls } of forms) {
    it(`replied ${form} decides as lone calls would, and a request that fails fails alone`, async () => {
      const server = await startRedisServer();
      const redis = new Redis(server.url);
      const called: string[] = [];
      try {
        const store = redisStore(through(redis, methods, called) as never);
        const limiter = createLimiter({
          store,
          prefix: 'p',
          policy: fixedWindow({ limit: 5, window: '1m' }),
          onOutage: () => {},
        });
        // State never fails a request (it heals), so the bad one asks the limiter's script for an
        // algorithm it does not hold: the script fails on that request.
        const foreign = scriptArgs({
          op: 'limit',
          cost: 1,
          target: 0,
          ms: 0,
          penalty: { strikes: 0, blockMs: 0 },
          policies: [enginePolicy(slidingLog({ limit: 5, window: '1m' }))],
        });
        const bad = () =>
          store
            .run(
              compiled(limiter.policies.map(enginePolicy)).script,
              callKeys('p', 'bad', limiter.policies.map(enginePolicy)),
              foreign,
            )
            .then(
              () => undefined,
              (error: Error) => error,
            );
        const replies = await Promise.all(
          Array.from({ length: 8 }, () => [limiter.limit('a'), bad(), limiter.limit('b')]).flat(),
        );
        for (const [offset, key] of ['a', 'bad', 'b'].entries()) {
          const own = replies.filter((_, i) => i % 3 === offset);
          if (key === 'bad') {
            for (const error of own) assert.match((error as Error | undefined)?.message ?? '', /attempt to index/);
          } else {
            const decisions = own as Decision[];
            assert.deepEqual(
              decisions.map((d) => [d.allowed, d.remaining]),
              [...[4, 3, 2, 1, 0].map((r) => [true, r]), [false, 0], [false, 0], [false, 0]],
              key,
            );
            assert.ok(decisions.every((d) => d.error === undefined));
          }
        }
        // The first batch finds the script missing (NOSCRIPT) and sends it whole.
        assert.deepEqual([...new Set(called)].sort(), [...batchCalls].sort());
        assert.equal(await redis.get('p:{a}:fw'), '5');
      } finally {
        redis.disconnect();
        await server.stop();
      }
    });
  }
});

describe('when the calls go out', () => {
  it('idle, at the end of their tick; busy (a command out, or the last turn gathered several), at the end of the turn', async () => {
    const server = await startRedisServer();
    const redis = new Redis(server.url);
    let gate = Promise.resolve();
    const sent: string[] = [];
    // The store's client, whose commands reach Redis only once the gate opens.
    const client = redis as unknown as Record<string, Command>;
    const held = Object.fromEntries(
      ['evalsha', 'eval', 'evalshaBuffer', 'evalBuffer'].map((name) => [
        name,
        async (...args: string[]) => {
          sent.push(name);
          await gate;
          return (client[name] as Command).apply(redis, args);
        },
      ]),
    );
    try {
      const limiter = createLimiter({
        store: redisStore(held as never),
        prefix: 'turn',
        policy: fixedWindow({ limit: 5, window: '1m' }),
      });
      // Loads the lone and the batch script, so that each call below is one command.
      await Promise.all([limiter.limit('load'), limiter.limit('load')]);
      await limiter.limit('load');
      sent.length = 0;

      const idle = limiter.limit('idle');
      await new Promise<void>((resolve) => process.nextTick(resolve));
      assert.deepEqual(sent, ['evalsha'], 'a call made with no command out goes before the end of its tick');
      assert.equal((await idle).remaining, 4);

      let open = () => {};
      gate = new Promise((resolve) => (open = resolve));
      const out = limiter.limit('out');
      // Two calls in two ticks of one turn (each immediate is a tick of its own), while `out` is unanswered.
      const calls: Promise<Decision>[] = [];
      for (const key of ['in-1', 'in-2']) setImmediate(() => calls.push(limiter.limit(key)));
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(sent, ['evalsha', 'evalsha', 'evalshaBuffer'], 'the two calls go as one batch');
      open();
      assert.deepEqual(
        (await Promise.all([out, ...calls])).map((d) => d.remaining),
        [4, 4, 4],
      );

      // That turn gathered two calls: with none out now, the next call still waits for the turn's end.
      const next = limiter.limit('next');
      await new Promise<void>((resolve) => process.nextTick(resolve));
      assert.equal(sent.length, 3, 'a call after a turn that gathered several waits for the end of its turn');
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal(sent.length, 4);
      assert.equal((await next).remaining, 4);
      // That one gathered one call alone: the store is idle again.
      const last = limiter.limit('last');
      await new Promise<void>((resolve) => process.nextTick(resolve));
      assert.equal(sent.length, 5, 'a call with none out after a turn of one call goes before the end of its tick');
      assert.equal((await last).remaining, 4);
    } finally {
      redis.disconnect();
      await server.stop();
    }
  });
});
