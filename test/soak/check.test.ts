import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { healthyRuns, overLimit, type Admission } from '../../soak/check.js';
import { checkRun } from '../../soak/check-run.js';
import { historyWriter, type CallRecord, type HistoryRecord } from '../../soak/history.js';
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

/** The checker's summary of a history of these records. */
async function check(records: readonly HistoryRecord[]) {
  const dir = await mkdtemp(join(tmpdir(), 'soak-check-'));
  try {
    const history = historyWriter(join(dir, 'worker-0.jsonl'));
    records.forEach((record) => history.write(record));
    history.close();
    return await checkRun(dir, 'p', []);
  } finally {
    await rm(dir, { recursive: true });
  }
}

describe("the soak's checker: a server time that cannot be the call's", () => {
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

describe("the soak's checker: leased limiters, counted at their takes", () => {
  // fixedWindow+lease: 5 per aligned second. Its take's server times, within a window of this machine's clock.
  const limiter = 'fixedWindow+lease';
  const key = 'leased-0';
  const t0 = Math.ceil(Date.now() / 1000) * 1000;
  const startMs = t0 - 5;
  let id = 0;
  /** A worker's step, and its end: replied at `serverMs` (allowed or not), or none (its worker died first). */
  const step = (
    worker: number,
    op: 'take' | 'limit' | 'refund',
    cost: number,
    end: { serverMs: number; allowed: boolean; taken?: number } | undefined,
    chargedAtMs?: number,
  ): HistoryRecord[] => {
    const record = {
      worker,
      id: id++,
      limiter,
      key,
      op,
      cost,
      startMs,
      ...(chargedAtMs !== undefined && { chargedAtMs }),
    };
    return [
      { type: 'step', ...record },
      ...(end ? [{ type: 'step-end', worker, id: record.id, endMs: startMs + 1, ...end } as const] : []),
    ];
  };
  /** A call the worker admitted from the units of the step Redis ran at `serverMs`. */
  const admitted = (worker: number, serverMs: number, cost = 1): CallRecord => ({
    type: 'call',
    worker,
    limiter,
    key,
    cost,
    startMs,
    endMs: startMs + 1,
    outcome: 'allowed',
    serverMs,
  });
  /**
   * Worker 0 takes 3 at t0 + 10, admits `admits` units from them and gives `back` back (given as
   * `given` says); worker 1 takes 2 of up to 3 at t0 + 20 and admits them, then asks for 1 alone at
   * t0 + 30, admitted.
   */
  const history = (admits: number, back: number, given: boolean | undefined): HistoryRecord[] => [
    ...step(0, 'take', 3, { serverMs: t0 + 10, allowed: true, taken: 3 }),
    ...Array.from({ length: admits }, () => admitted(0, t0 + 10)),
    ...(back > 0
      ? step(0, 'refund', back, given === undefined ? undefined : { serverMs: t0 + 15, allowed: given }, t0 + 10)
      : []),
    ...step(1, 'take', 3, { serverMs: t0 + 20, allowed: true, taken: 2 }),
    ...Array.from({ length: 2 }, () => admitted(1, t0 + 20)),
    ...step(1, 'limit', 1, { serverMs: t0 + 30, allowed: true }),
    admitted(1, t0 + 30),
  ];

  it('passes takes less what was given back, within the limit: 3 - 1 + 2 + 1', async () => {
    const summary = await check(history(2, 1, true));
    assert.deepEqual(summary.violations, {});
    assert.deepEqual(summary.leases, {
      takes: 3,
      unitsTaken: 6,
      unitsAdmitted: 5,
      unitsReturned: 1,
      unitsReturnedUnknown: 0,
    });
  });

  it('finds a worker admitting more from a lease than it took, less what it gave back', async () => {
    const { violations } = await check(history(3, 1, true));
    assert.equal(violations['over its lease']?.count, 1);
    assert.match(violations['over its lease']?.examples[0] ?? '', /3 units admitted and 1 given back of the 3 taken/);
    assert.equal((await check(history(4, 0, undefined))).violations['over its lease']?.count, 1);
  });

  it('finds an admission with no take of its own at its time', async () => {
    const { violations } = await check([...history(2, 1, true), admitted(1, t0 + 40)]);
    assert.equal(violations['over its lease']?.count, 1);
    // Worker 1's take took 2 of the 3 it asked for: a third admission from it is one too many.
    assert.equal((await check([...history(2, 1, true), admitted(1, t0 + 20)])).violations['over its lease']?.count, 1);
  });

  it('counts what Redis did not give back as spent at the take: 3 + 2 + 1 over 5', async () => {
    const { violations } = await check(history(2, 1, false));
    assert.equal(violations['over the limit']?.count, 1);
    assert.equal(violations['over its lease'], undefined);
  });

  it('counts a give-back whose outcome is unknown (its worker killed) as given', async () => {
    const summary = await check(history(2, 1, undefined));
    assert.deepEqual(summary.violations, {});
    assert.equal(summary.leases.unitsReturnedUnknown, 1);
  });
});
