import assert from 'node:assert/strict';
import { it } from 'node:test';
import {
  concurrency,
  createLimiter,
  CostExceedsLimitError,
  fixedWindow,
  InvalidArgumentError,
  memoryStore,
  redisStore,
  WrongMethodError,
} from '../../src/index.js';
import { algorithms } from '../support/algorithms.js';
import { Redis } from 'ioredis';

it('limitMany on the memory store decides each key in order, a repeated key counted each time', async () => {
  for (const algorithm of algorithms) {
    const limiter = createLimiter({ store: memoryStore({ now: () => 0 }), policy: algorithm.policy(2, 60_000) });
    const decisions = await limiter.limitMany(['a', 'b', 'a', 'a']);
    assert.deepEqual(
      decisions.map((d) => [d.allowed, d.remaining]),
      [
        [true, 1],
        [true, 1],
        [true, 0],
        [false, 0],
      ],
      algorithm.name,
    );
    assert.deepEqual(await limiter.limitMany([]), []);
    await assert.rejects(limiter.limitMany(['c'], { cost: 3 }), CostExceedsLimitError);
    assert.equal((await limiter.peek('c')).remaining, 2);
  }
});

it('limitNow on the memory store decides at once, from the same state as limit()', async () => {
  for (const algorithm of algorithms) {
    const limiter = createLimiter({ store: memoryStore({ now: () => 0 }), policy: algorithm.policy(3, 60_000) });
    const limitNow = limiter.limitNow as NonNullable<typeof limiter.limitNow>;
    const first = limitNow('a');
    assert.equal(first instanceof Promise, false, algorithm.name);
    const answers = [first, await limiter.limit('a'), limitNow('a'), limitNow('a')];
    assert.deepEqual(
      answers.map((d) => [d.allowed, d.remaining]),
      [
        [true, 2],
        [true, 1],
        [true, 0],
        [false, 0],
      ],
      algorithm.name,
    );
    assert.deepEqual(
      [limitNow('b', { cost: 2 }).remaining, (await limiter.peek('b')).remaining],
      [1, 1],
      algorithm.name,
    );
    // Bad input throws, as limit() rejects, and counts nothing.
    assert.throws(() => limitNow(''), InvalidArgumentError);
    assert.throws(() => limitNow('c', { cost: 4 }), CostExceedsLimitError);
    assert.equal((await limiter.peek('c')).remaining, 3, algorithm.name);
  }
});

it('limitNow is there only where the store decides in this process and no lease is taken', () => {
  const policy = fixedWindow({ limit: 5, window: '1m' });
  // Never connected: a Redis limiter asks nothing of its store until it decides.
  const client = new Redis({ lazyConnect: true });
  assert.equal(createLimiter({ store: redisStore(client), policy }).limitNow, undefined);
  client.disconnect();
  const leased = createLimiter({ store: memoryStore(), policy, lease: { units: 2, ms: 1000 } });
  assert.equal(leased.limitNow, undefined);
  const slots = createLimiter({ store: memoryStore(), policy: concurrency({ limit: 1, leaseMs: 1000 }) });
  assert.throws(() => slots.limitNow?.('k'), WrongMethodError);
});
