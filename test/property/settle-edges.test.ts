import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import {
  createLimiter,
  memoryStore,
  redisStore,
  type Decision,
  type Limiter,
  type Reservation,
} from '../../src/index.js';
import { assertNeverOverAdmitted, type Admission } from '../support/admissions.js';
import { algorithms } from '../support/algorithms.js';
import { uniquePrefix, useRedis } from '../support/redis.js';

// Budgets across window edges (issue #31): reservations settled, and decisions refunded, after
// time has moved on, often past the end of the window that charged them. What a key admits, at what
// each request cost in the end, never exceeds what its algorithm promises (the model of
// test/support/admissions.ts). A settle that gave an ended window's units to the next one, or a
// bucket units a full bucket had lost, admits past it.

const harness = useRedis();
const SEED = Number(process.env.SEED ?? 20_261_202);
const LIMIT = 6;

type Step =
  | { readonly kind: 'reserve' | 'limit'; readonly cost: number }
  | { readonly kind: 'wait'; readonly ms: number }
  /** Lowers an open charge (`pick` of them) by `part` of its cost, at most all of it. */
  | { readonly kind: 'settle' | 'refund'; readonly pick: number; readonly part: number };

// Small costs, waits under half a window and many settles and refunds: so that a window fills,
// ends, and then has an earlier window's charge lowered while it fills again.
const steps = (windowMs: number) =>
  fc.array(
    fc.oneof(
      {
        weight: 4,
        arbitrary: fc.record({
          kind: fc.constantFrom('reserve' as const, 'limit' as const),
          cost: fc.integer({ min: 1, max: 3 }),
        }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          kind: fc.constant('wait' as const),
          ms: fc.integer({ min: 0, max: Math.floor(windowMs / 2) }),
        }),
      },
      {
        weight: 3,
        arbitrary: fc.record({
          kind: fc.constantFrom('settle' as const, 'refund' as const),
          pick: fc.nat(),
          part: fc.integer({ min: 1, max: LIMIT }),
        }),
      },
    ),
    { minLength: 1, maxLength: 60 },
  );

/** An admission's cost so far, and how its charge can be lowered: settle (a reservation) or refund. */
interface Charge {
  readonly at: number;
  cost: number;
  readonly lower: (by: number) => Promise<boolean>;
}

/**
 * Runs `scenario` on `limiter`, waiting by `wait`: each admission's cost is what is left of it after
 * the settles and refunds that lower it (each at most once, by a part of what it cost).
 */
async function admissionsOf(
  limiter: Limiter,
  key: string,
  scenario: readonly Step[],
  wait: (ms: number) => Promise<void>,
): Promise<Admission[]> {
  const charges: Charge[] = [];
  const open: Charge[] = [];
  const admitted = (decision: Decision, cost: number, lower: Charge['lower']) => {
    if (!decision.allowed) return;
    assert.ok(decision.decidedAt !== undefined, 'a decision of the store says when it was made');
    const charge = { at: decision.decidedAt, cost, lower };
    charges.push(charge);
    open.push(charge);
  };
  for (const step of scenario) {
    if (step.kind === 'wait') await wait(step.ms);
    else if (step.kind === 'reserve') {
      const reservation: Reservation = await limiter.reserve(key, { cost: step.cost });
      admitted(reservation, step.cost, (by) => reservation.settle(step.cost - by));
    } else if (step.kind === 'limit') {
      const decision = await limiter.limit(key, { cost: step.cost });
      admitted(decision, step.cost, (by) => limiter.refund(key, by, { decision }));
    } else if (open.length > 0 && (step.kind === 'settle' || step.kind === 'refund')) {
      const [charge] = open.splice(step.pick % open.length, 1) as [Charge];
      const by = Math.min(charge.cost, step.part);
      await charge.lower(by);
      charge.cost -= by;
    }
  }
  return charges.map(({ at, cost }) => ({ key, at, cost }));
}

describe('settle and refund across window edges never admit past the limit', () => {
  for (const algorithm of algorithms) {
    it(`${algorithm.name}, in memory on a fake clock`, async () => {
      const scenario = fc.record({
        windowMs: fc.integer({ min: 10, max: 1_000 }),
        start: fc.integer({ min: 1, max: 10 ** 12 }),
      });
      await fc.assert(
        fc.asyncProperty(
          scenario.chain((s) => fc.record({ s: fc.constant(s), steps: steps(s.windowMs) })),
          async ({ s: { windowMs, start }, steps: scenario }) => {
            let now = start;
            const policy = algorithm.policy(LIMIT, windowMs);
            const limiter = createLimiter({ store: memoryStore({ now: () => now }), policy });
            const admissions = await admissionsOf(limiter, 'k', scenario, (ms) => {
              now += ms;
              return Promise.resolve();
            });
            assertNeverOverAdmitted(policy, windowMs, admissions);
          },
        ),
        { numRuns: 1_500, seed: SEED, includeErrorInReport: true },
      );
    });

    it(`${algorithm.name}, in Redis on its clock`, async () => {
      const windowMs = 60;
      const policy = algorithm.policy(LIMIT, windowMs);
      await fc.assert(
        fc.asyncProperty(steps(windowMs), async (scenario) => {
          const limiter = createLimiter({ store: redisStore(harness.redis), policy, prefix: uniquePrefix() });
          const admissions = await admissionsOf(limiter, 'k', scenario, (ms) => sleep(ms));
          assertNeverOverAdmitted(policy, windowMs, admissions);
        }),
        { numRuns: 8, seed: SEED, includeErrorInReport: true },
      );
    });
  }
});
