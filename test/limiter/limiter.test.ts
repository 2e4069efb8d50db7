import assert from 'node:assert/strict';
import { it } from 'node:test';
import { createLimiter, CostExceedsLimitError, memoryStore } from '../../src/index.js';
import { algorithms } from '../support/algorithms.js';

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
