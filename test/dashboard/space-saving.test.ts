import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SpaceSaving } from '../../src/dashboard/space-saving.js';
import { random, zipf } from '../support/zipf.js';

describe('Space-Saving', () => {
  it('on a Zipf stream of 1,000,000 calls over 100,000 keys, reports the top 10 within N/k of their exact counts', () => {
    const capacity = 1000;
    const calls = 1_000_000;
    const draw = zipf(100_000, 1.1, random(29));
    const summary = new SpaceSaving(capacity);
    const exact = new Map<string, number>();
    for (let i = 0; i < calls; i++) {
      const key = `user:${draw()}`;
      summary.add(key);
      exact.set(key, (exact.get(key) ?? 0) + 1);
    }
    const bound = calls / capacity;
    assert.equal(summary.total, calls);
    assert.equal(summary.size, capacity);
    assert.ok(summary.bound <= bound, `the smallest counter ${summary.bound} is at most N/k = ${bound}`);
    const top = summary.top(10);
    const trueTop = [...exact].sort((a, b) => b[1] - a[1]).slice(0, 10);
    for (const { item, count, error } of top) {
      const truth = exact.get(item) as number;
      assert.ok(
        count >= truth && count - truth <= error && error <= bound,
        `${item}: ${count} ±${error}, exactly ${truth}`,
      );
    }
    // With this skew the ten heaviest stand far above the bound: the same keys, in the same order.
    assert.deepEqual(
      top.map((hit) => hit.item),
      trueTop.map(([key]) => key),
    );
    // Every key whose true count exceeds N/k is monitored.
    const monitored = new Set(summary.top(capacity).map((hit) => hit.item));
    const heavy = [...exact].filter(([, count]) => count > bound);
    assert.ok(heavy.length > 10, `${heavy.length} keys above the bound`);
    for (const [key] of heavy) assert.ok(monitored.has(key), `${key} (${exact.get(key)}) is monitored`);
  });

  it('keeps k counters, whatever the stream: 1,000,000 distinct keys', () => {
    const summary = new SpaceSaving(100);
    for (let i = 0; i < 1_000_000; i++) {
      summary.add(`key:${i}`);
      if (i % 100_000 === 99) assert.equal(summary.size, 100);
    }
    assert.equal(summary.size, 100);
    assert.equal(summary.total, 1_000_000);
    // Every counter took over from the smallest: none above N/k + 1.
    for (const hit of summary.top(100)) assert.ok(hit.count <= 1_000_000 / 100 + 1 && hit.count - hit.error === 1);
  });

  it('counts exactly while it holds fewer keys than its capacity', () => {
    const summary = new SpaceSaving(10);
    for (const [key, n] of [
      ['a', 5],
      ['b', 3],
      ['c', 7],
    ] as const)
      for (let i = 0; i < n; i++) summary.add(key);
    assert.deepEqual(summary.top(10), [
      { item: 'c', count: 7, error: 0 },
      { item: 'a', count: 5, error: 0 },
      { item: 'b', count: 3, error: 0 },
    ]);
    assert.equal(summary.bound, 0);
  });
});
