import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EXACT_PER_SECOND, SAMPLE_ONE_IN } from '../../src/dashboard/key-summary.js';
import { Series } from '../../src/dashboard/series.js';
import { random, zipf } from '../support/zipf.js';

const NOW = Date.UTC(2026, 11, 3, 8, 0, 0);

describe("a series' summaries of keys", () => {
  it(`count each key exactly while a second holds at most ${EXACT_PER_SECOND} decisions`, () => {
    const series = new Series('p', 60, 1000);
    // Two seconds of EXACT_PER_SECOND decisions each: a key every tenth decision denied.
    for (let second = 0; second < 2; second++)
      for (let i = 0; i < EXACT_PER_SECOND; i++)
        series.count(`k${i % 4}`, i % 10 === 0 ? 'denied' : 'admitted', NOW + second * 1000 + (i % 1000));
    const snapshot = series.snapshot(NOW + 1999, 10);
    assert.deepEqual(snapshot.sampled, { used: 0, denied: 0 });
    assert.deepEqual(
      snapshot.topUsed.map(({ item, count, error }) => [item, count, error]),
      [
        ['k0', 500, 0],
        ['k1', 500, 0],
        ['k2', 500, 0],
        ['k3', 500, 0],
      ],
    );
    assert.deepEqual(
      snapshot.topDenied.map(({ item, count }) => [item, count]),
      [
        ['k0', 100],
        ['k2', 100],
      ],
    );
  });

  it(`past that, sample one decision in ${SAMPLE_ONE_IN}, standing for ${SAMPLE_ONE_IN}: the Zipf top 10 within the documented bound`, () => {
    const capacity = 1000;
    const series = new Series('p', 60, capacity);
    const draw = zipf(100_000, 1.1, random(29));
    const exact = new Map<string, number>();
    const denied = new Map<string, number>();
    const calls = 1_000_000;
    for (let i = 0; i < calls; i++) {
      const key = `user:${draw()}`;
      const used = (exact.get(key) ?? 0) + 1;
      exact.set(key, used);
      // Each key's requests past its 50th in the run are denied: the heavy keys' mostly.
      const outcome = used > 50 ? 'denied' : 'admitted';
      if (outcome === 'denied') denied.set(key, (denied.get(key) ?? 0) + 1);
      series.count(key, outcome, NOW + Math.floor((i / calls) * 1000)); // all in one second
    }
    const snapshot = series.snapshot(NOW, 10);
    assert.equal(snapshot.total.admitted + snapshot.total.denied, calls, 'every decision counted in the totals');
    // N is the first second's exact decisions and the weighted samples; the samples are about 1 in 8.
    assert.equal(snapshot.seen.used, EXACT_PER_SECOND + snapshot.sampled.used);
    const expected = calls - EXACT_PER_SECOND;
    assert.ok(Math.abs(snapshot.sampled.used - expected) < 5 * Math.sqrt(expected * (SAMPLE_ONE_IN - 1)));
    const within = (truth: Map<string, number>, top: typeof snapshot.topUsed, label: string) => {
      for (const { item, count, error } of top) {
        const count_ = truth.get(item) as number;
        // docs/dashboard.md: sampling adds a deviation of sqrt((SAMPLE_ONE_IN - 1) x count), one standard deviation.
        const spread = 5 * Math.sqrt((SAMPLE_ONE_IN - 1) * count_);
        assert.ok(
          count >= count_ - spread && count - error <= count_ + spread,
          `${label} ${item}: ${count} ±${error}, exactly ${count_}, spread ${spread.toFixed(0)}`,
        );
      }
      const trueTop = [...truth].sort((a, b) => b[1] - a[1]).slice(0, 5);
      assert.deepEqual(
        top.slice(0, 5).map((hit) => hit.item),
        trueTop.map(([key]) => key),
        `${label}: the five heaviest, in order`,
      );
    };
    within(exact, snapshot.topUsed, 'used');
    within(denied, snapshot.topDenied, 'denied');
  });
});
