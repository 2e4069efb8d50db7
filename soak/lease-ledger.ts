import type { CallRecord, StepEndRecord, StepRecord } from './history.js';

/*
 * The leased limiters' accounts, from their workers' steps and calls (soak/history.ts). A lease's
 * units are spent in Redis at its take, so Redis counts them there: what a worker admits from them
 * must fit in what it took, less what it gave back. What Redis counted (takes less what was given
 * back) is what the algorithm's invariant is checked on, at the take's server time.
 */

/** One worker's takes of one limiter and key at one server ms (a lease's take, or a request asked alone). */
interface Account {
  readonly worker: number;
  readonly limiter: string;
  readonly key: string;
  readonly atMs: number;
  /** Units Redis admitted to the worker's steps at that ms. */
  taken: number;
  /** Units of the worker's calls admitted with that ms as their decision's time. */
  admitted: number;
  /** Units the worker sent back to that ms by refund, whatever came of it. */
  returned: number;
  /** Of them, those Redis gave back, or may have (the step failed, or its worker died before the reply). */
  given: number;
}

/** What Redis counted of one take, for the invariant: at its server time, its units less those given back. */
export interface Counted {
  readonly limiter: string;
  readonly key: string;
  readonly atMs: number;
  readonly cost: number;
}

export interface LeaseTotals {
  /** Take and limit steps Redis admitted, and their units. */
  takes: number;
  unitsTaken: number;
  /** Units the workers' calls admitted from them. */
  unitsAdmitted: number;
  /** Units sent back by refund; of them, those whose outcome is unknown (failed, or never answered). */
  unitsReturned: number;
  unitsReturnedUnknown: number;
}

export class LeaseLedger {
  private readonly steps = new Map<string, StepRecord>();
  private readonly ends = new Map<string, StepEndRecord>();
  private readonly accounts = new Map<string, Account>();
  readonly totals: LeaseTotals = {
    takes: 0,
    unitsTaken: 0,
    unitsAdmitted: 0,
    unitsReturned: 0,
    unitsReturnedUnknown: 0,
  };

  step(record: StepRecord): void {
    this.steps.set(`${record.worker}:${record.id}`, record);
  }

  end(record: StepEndRecord): void {
    this.ends.set(`${record.worker}:${record.id}`, record);
  }

  /** A call of a leased limiter that Redis's units admitted: `serverMs` is its decision's time. */
  admitted(record: CallRecord, serverMs: number): void {
    this.account(record.worker, record.limiter, record.key, serverMs).admitted += record.cost;
    this.totals.unitsAdmitted += record.cost;
  }

  private account(worker: number, limiter: string, key: string, atMs: number): Account {
    const id = `${worker}\n${limiter}\n${key}\n${atMs}`;
    let account = this.accounts.get(id);
    if (!account)
      this.accounts.set(id, (account = { worker, limiter, key, atMs, taken: 0, admitted: 0, returned: 0, given: 0 }));
    return account;
  }

  /**
   * Joins each step with its end, reports each account that admitted or returned more than it took
   * (`overLease`) and each step that is not a take, limit or refund (`unexpected`), and returns what
   * Redis counted of each take.
   */
  settle(overLease: (example: string) => void, unexpected: (example: string) => void): Counted[] {
    for (const [id, step] of this.steps) {
      const end = this.ends.get(id);
      if (step.op === 'take' || step.op === 'limit') {
        if (end?.allowed !== true || end.serverMs === undefined) continue;
        const units = step.op === 'take' ? (end.taken ?? NaN) : step.cost;
        if (!(units <= step.cost)) {
          unexpected(
            `${step.limiter} "${step.key}" (worker ${step.worker}): a take of up to ${step.cost} units took ${units}`,
          );
          continue;
        }
        this.account(step.worker, step.limiter, step.key, end.serverMs).taken += units;
        this.totals.takes++;
        this.totals.unitsTaken += units;
      } else if (step.op === 'refund' && step.chargedAtMs !== undefined) {
        const account = this.account(step.worker, step.limiter, step.key, step.chargedAtMs);
        account.returned += step.cost;
        this.totals.unitsReturned += step.cost;
        const unknown = end === undefined || end.error !== undefined;
        if (unknown) this.totals.unitsReturnedUnknown += step.cost;
        // A step that failed may still have run: counting it as given can only hide an excess.
        if (unknown || end.allowed === true) account.given += step.cost;
      } else {
        unexpected(
          `${step.limiter} "${step.key}" (worker ${step.worker}): a ${step.op} step, which the soak never asks for`,
        );
      }
    }
    const counted: Counted[] = [];
    for (const { worker, limiter, key, atMs, taken, admitted, returned, given } of this.accounts.values()) {
      if (admitted + returned > taken)
        overLease(
          `${limiter} "${key}" (worker ${worker}): ${admitted} units admitted and ${returned} given back of the ${taken} taken at ${atMs}`,
        );
      if (taken > given) counted.push({ limiter, key, atMs, cost: taken - given });
    }
    return counted;
  }
}
