import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { checkRun, healthyRuns, overLimit, type Admission } from '../../soak/check.js';
import { historyWriter, type CallRecord } from '../../soak/history.js';
import type { Invariant } from '../../soak/plan.js';

/** Admissions of cost 1 at these server times. */
const at = (...times: number[]): Admission[] => times.map((atMs) => ({ atMs, cost: 1 }));

describe("the soak's checker: each invariant exact at its edge", () => {
  const cases: { invariant: Invariant; within: Admission[]; over: Admission[] }[] = [
    {
      // Windows [1000, 2000) and [2000, 3000): 2 at the end of one and 2 at the start of the next are fine.
      invariant: { kind: 'fixed-window', limit: 2, windowMs: 1000 },
      within: at(1998, 1999, 2000, 2001),
      over: at(1000, 1500, 1999),
    },
    {
      // (t - 1000, t]: the entry at 1000 has left the window at 2000, the one at 1001 has not.
      invariant: { kind: 'sliding-log', limit: 2, windowMs: 1000 },
      within: at(1000, 1500, 2000, 2500),
      over: at(1001, 1500, 2000),
    },
    {
      // A burst of 2, then one per 100 ms: a third within 100 ms of the burst is one too many.
      invariant: { kind: 'rate', burst: 2, intervalMs: 100 },
      within: at(1000, 1000, 1100, 1200, 1300),
      over: [...at(1000, 1000, 1099)],
    },
    {
      // 2 in [0, 1000); at 1500 the previous window still weighs 2 * 500 / 1000 = 1: one more fits, not two.
      invariant: { kind: 'sliding-window', limit: 2, windowMs: 1000 },
      within: at(900, 999, 1500),
      over: at(900, 999, 1500, 1600),
    },
    {
      // 2 slots: a lease released at 1050 frees its slot for an acquire at 1050, not at 1049.
      invariant: { kind: 'concurrency', limit: 2, leaseMs: 1000 },
      within: [
        { atMs: 1000, cost: 1, heldUntilMs: 1050 },
        { atMs: 1010, cost: 1, heldUntilMs: 2010 },
        { atMs: 1050, cost: 1, heldUntilMs: 2050 },
      ],
      over: [
        { atMs: 1000, cost: 1, heldUntilMs: 1050 },
        { atMs: 1010, cost: 1, heldUntilMs: 2010 },
        { atMs: 1049, cost: 1, heldUntilMs: 2049 },
      ],
    },
  ];
  for (const { invariant, within, over } of cases) {
    it(invariant.kind, () => {
      assert.deepEqual(overLimit(invariant, within), []);
      assert.equal(overLimit(invariant, over).length, 1);
    });
  }

  it('counts costs, and ties at one ms together', () => {
    assert.equal(
      overLimit({ kind: 'fixed-window', limit: 3, windowMs: 1000 }, [
        { atMs: 5, cost: 2 },
        { atMs: 5, cost: 2 },
      ]).length,
      1,
    );
    assert.equal(
      overLimit({ kind: 'sliding-log', limit: 3, windowMs: 1000 }, [
        { atMs: 5, cost: 2 },
        { atMs: 5, cost: 2 },
      ]).length,
      1,
    );
  });
});

describe("the soak's checker: runs between losses", () => {
  const loss = { startMs: 2000, endMs: 3000, slots: [[100, 200]] as const };

  it("splits a key's admissions at a loss of its slot and leaves out those made during it", () => {
    assert.deepEqual(healthyRuns(at(1000, 1999, 2000, 2500, 3000, 3001), 150, [loss]), [at(1000, 1999), at(3001)]);
  });

  it('leaves a key on another slot whole', () => {
    assert.deepEqual(healthyRuns(at(1000, 2500, 3001), 201, [loss]), [at(1000, 2500, 3001)]);
  });
});

describe("the soak's checker: a server time that cannot be the call's", () => {
  /** The checker's summary of one worker's calls. */
  async function check(calls: readonly CallRecord[]) {
    const dir = await mkdtemp(join(tmpdir(), 'soak-check-'));
    try {
      const history = historyWriter(join(dir, 'worker-0.jsonl'));
      calls.forEach((call) => history.write(call));
      await history.close();
      return await checkRun(dir, 'p', []);
    } finally {
      await rm(dir, { recursive: true });
    }
  }
  const startMs = Date.now();
  const call = (limiter: string, serverMs: number, release?: CallRecord['release']): CallRecord => ({
    type: 'call',
    worker: 0,
    limiter,
    key: 'client-0',
    cost: 1,
    startMs,
    endMs: startMs + 2,
    outcome: 'allowed',
    serverMs,
    ...(release && { release }),
  });

  it('is the worker failing, not admissions over the limit', async () => {
    // Another field of the reply read as the time: allowed, 1, as a worker once did.
    const { violations } = await check(Array.from({ length: 6 }, () => call('tokenBucket', 1)));
    assert.equal(violations['worker failed']?.count, 6);
    assert.equal(violations['over the limit'], undefined);
  });

  it("is a lease's release too", async () => {
    const release = { startMs: startMs + 3, endMs: startMs + 4, outcome: 'released', serverMs: 1 } as const;
    const { violations } = await check([call('concurrency', startMs + 1, release)]);
    assert.equal(violations['worker failed']?.count, 1);
  });

  it('leaves times of this machine alone', async () => {
    const { violations } = await check([call('tokenBucket', startMs + 1), call('tokenBucket', startMs + 1)]);
    assert.deepEqual(violations, {});
  });
});
