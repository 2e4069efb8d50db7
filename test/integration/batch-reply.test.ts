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
