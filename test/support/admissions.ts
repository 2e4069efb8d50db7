import assert from 'node:assert/strict';
import type { Policy } from '../../src/index.js';

/** One admitted request of a key: when, by the store's clock, and what it cost in the end. */
export interface Admission {
  readonly key: string;
  readonly at: number;
  readonly cost: number;
}

/**
 * What each algorithm promises, checked over every admission of one key:
 * fixed window: at most `limit` in each window aligned to the clock;
 * sliding log: at most `limit` in any window of `windowMs` ending at an admission;
 * sliding window: at most `limit` in each window aligned to the clock (its estimate is never below
 * the current window's count);
 * token bucket and GCRA: at most `limit + elapsed * limit / windowMs` in any span between two admissions.
 */
export function assertNeverOverAdmitted(policy: Policy, windowMs: number, admissions: readonly Admission[]): void {
  const { algorithm, limit } = policy;
  const keys = new Set(admissions.map((a) => a.key));
  for (const key of keys) {
    const log = admissions.filter((a) => a.key === key);
    for (const [i, first] of log.entries()) {
      const sum = (from: number, to: number) =>
        log.filter((a) => from <= a.at && a.at <= to).reduce((total, a) => total + a.cost, 0);
      if (algorithm === 'fixed-window' || algorithm === 'sliding-window') {
        const start = first.at - (first.at % windowMs);
        assert.ok(sum(start, start + windowMs - 1) <= limit, `${key}: over ${limit} in the window from ${start}`);
      } else if (algorithm === 'sliding-log') {
        assert.ok(
          sum(first.at - windowMs + 1, first.at) <= limit,
          `${key}: over ${limit} in the window ending ${first.at}`,
        );
      } else {
        for (const last of log.slice(i)) {
          const allowed = limit + ((last.at - first.at) * limit) / windowMs;
          assert.ok(sum(first.at, last.at) <= allowed + 1e-9, `${key}: over ${allowed} from ${first.at} to ${last.at}`);
        }
      }
    }
  }
}
