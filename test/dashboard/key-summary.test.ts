import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KeySummary, SAMPLE_ONE_IN } from '../../src/dashboard/key-summary.js';

describe('a summary of keys counted and sampled', () => {
  it('adds both parts of a key, counting a part it does not hold as that summary’s bound, in its error too', () => {
    const summary = new KeySummary(2);
    for (const [key, n] of [
      ['a', 5],
      ['b', 3],
      ['c', 1], // full: c takes over b's 3, so c is 4, error 3
    ] as const)
      for (let i = 0; i < n; i++) summary.add(key);
    for (const key of ['d', 'd', 'a']) summary.addSample(key);
    const W = SAMPLE_ONE_IN;
    // Counted: a 5, c 4 (error 3), bound 4. Sampled: d 2, a 1, bound 1.
    assert.deepEqual(summary.top(10), [
      { item: 'd', count: 4 + 2 * W, error: 4 }, // truly 2 W: not counted one by one, so up to 4 there
      { item: 'a', count: 5 + W, error: 0 }, // truly 5 + W
      { item: 'c', count: 4 + W, error: 3 + W }, // truly 1: up to 3 over, and up to one sample's bound
    ]);
    assert.equal(summary.total, 9 + 3 * W);
    assert.equal(summary.sampledTotal, 3 * W);
    assert.equal(summary.bound, 4 + W);
    assert.deepEqual(summary.top(1), [{ item: 'd', count: 4 + 2 * W, error: 4 }]);
  });

  it('is the counted summary alone until a key is sampled', () => {
    const summary = new KeySummary(10);
    for (const key of ['x', 'y', 'x']) summary.add(key);
    assert.deepEqual(summary.top(10), [
      { item: 'x', count: 2, error: 0 },
      { item: 'y', count: 1, error: 0 },
    ]);
    assert.equal(summary.bound, 0);
    assert.equal(summary.sampledTotal, 0);
  });
});
