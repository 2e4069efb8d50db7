import type { Timed } from './history.js';
import type { Invariant } from './plan.js';

// What the soak's history must show (docs/reliability.md, "Chaos soak"): admissions within each
// limit outside the times Redis may have lost writes, and the bounds below. soak/check-run.ts reads
// a run's history and applies them.

/** A request Redis admitted: at its server time, `cost` units; a lease holds them until `heldUntilMs`. */
export interface Admission {
  readonly atMs: number;
  readonly cost: number;
  readonly heldUntilMs?: number;
}

/** A time during which Redis may have lost writes to some slots. */
export interface Loss {
  readonly startMs: number;
  readonly endMs: number;
  readonly slots: readonly (readonly [number, number])[];
}

// A call still waiting when its timeout is due is answered when the limiter's deadline timer
// fires, by the time a timer set for the timeout + 1 ms at the call's start fires (the worker sets
// one; see timed() in worker.ts): late by the event loop's delay, which no library can beat. The
// call must be answered within this much after that timer: the steps from the deadline to the
// caller, measured at up to 5 ms on a busy 2-core machine.
export const ANSWER_SLACK_MS = 20;
// The writes of a kill are counted as lost from the kill until the cluster is settled again, and
// for this long after, a margin for the gossip that announces the new roles.
export const LOSS_MARGIN_MS = 1_000;
// The soak's state is bounded by design (a fixed set of keys, history streamed to disk): these
// are several times what a healthy run uses (see docs/reliability.md), far below what a leak reaches.
export const WORKER_HEAP_BOUND_BYTES = 256 * 2 ** 20;
export const NODE_MEMORY_BOUND_BYTES = 32 * 2 ** 20;
// Redis's TIME and a worker's clock are this machine's one clock, apart by the worker's drift since
// it started: a server time further than this from its call's span was misread (another field of
// the reply, say), and checked as the time it would put admissions at a wrong instant.
export const SERVER_TIME_SLACK_MS = 60_000;

/** Why `serverMs` cannot be the Redis time of `call`, or undefined if it can. */
export function misreadServerTime(serverMs: number, call: Timed): string | undefined {
  if (call.startMs - SERVER_TIME_SLACK_MS <= serverMs && serverMs <= call.endMs + SERVER_TIME_SLACK_MS) return;
  return `at server time ${serverMs}, not within ${SERVER_TIME_SLACK_MS} ms of its call (${call.startMs.toFixed(0)} to ${call.endMs.toFixed(0)} on the worker's clock)`;
}

/** Each way `invariant` is broken by `admissions` (sorted by time), described. */
export function overLimit(invariant: Invariant, admissions: readonly Admission[]): string[] {
  switch (invariant.kind) {
    case 'fixed-window':
      return fixedWindowExcess(invariant.limit, invariant.windowMs, admissions);
    case 'sliding-log':
      return slidingLogExcess(invariant.limit, invariant.windowMs, admissions);
    case 'rate':
      return rateExcess(invariant.burst, invariant.intervalMs, admissions);
    case 'sliding-window':
      return slidingWindowExcess(invariant.limit, invariant.windowMs, admissions);
    case 'concurrency':
      return concurrencyExcess(invariant.limit, admissions);
  }
}

/** Whether admission `i` is the last of those at its ms: a check made there sees them all. */
const lastAtItsTime = (admissions: readonly Admission[], i: number) => admissions[i + 1]?.atMs !== admissions[i]?.atMs;

/** At most `limit` units in each window aligned to the server's clock (`now - now % window`). */
function fixedWindowExcess(limit: number, windowMs: number, admissions: readonly Admission[]): string[] {
  const perWindow = new Map<number, number>();
  for (const { atMs, cost } of admissions) {
    const start = atMs - (atMs % windowMs);
    perWindow.set(start, (perWindow.get(start) ?? 0) + cost);
  }
  return [...perWindow]
    .filter(([, units]) => units > limit)
    .map(([start, units]) => `${units} units admitted in the window from ${start}`);
}

/** At most `limit` units admitted in (t - window, t], for every t. */
function slidingLogExcess(limit: number, windowMs: number, admissions: readonly Admission[]): string[] {
  const found: string[] = [];
  let first = 0;
  let units = 0;
  admissions.forEach(({ atMs, cost }, i) => {
    units += cost;
    for (; (admissions[first]?.atMs ?? Infinity) <= atMs - windowMs; first++) units -= admissions[first]?.cost ?? 0;
    if (lastAtItsTime(admissions, i) && units > limit)
      found.push(`${units} units admitted in (${atMs - windowMs}, ${atMs}]`);
  });
  return found;
}

/**
 * At most `burst` units plus one per `intervalMs` over any span [t1, t2]: a token bucket's
 * capacity plus its refill, GCRA's burst plus its emission interval. For each admission j, the
 * worst span ending there starts at the admission i <= j that maximises
 * units(i..j) * interval - (t_j - t_i), found in one pass with a running minimum.
 */
function rateExcess(burst: number, intervalMs: number, admissions: readonly Admission[]): string[] {
  const found: string[] = [];
  let unitsBefore = 0;
  let best = { value: Infinity, atMs: 0, unitsBefore: 0 };
  for (const { atMs, cost } of admissions) {
    const value = unitsBefore * intervalMs - atMs;
    if (value < best.value) best = { value, atMs, unitsBefore };
    unitsBefore += cost;
    const units = unitsBefore - best.unitsBefore;
    if (units * intervalMs > burst * intervalMs + (atMs - best.atMs))
      found.push(`${units} units admitted in [${best.atMs}, ${atMs}]`);
  }
  return found;
}

/**
 * The sliding window counter's own rule, held by every admission: the units of its aligned window
 * so far (itself included) plus the previous window's, weighted by how much of that window the
 * last `window` ms still covers, are at most `limit`. In integers, as the script compares them:
 * current * window + previous * (window - elapsed) <= limit * window.
 */
function slidingWindowExcess(limit: number, windowMs: number, admissions: readonly Admission[]): string[] {
  const perWindow = new Map<number, number>();
  for (const { atMs, cost } of admissions) {
    const start = atMs - (atMs % windowMs);
    perWindow.set(start, (perWindow.get(start) ?? 0) + cost);
  }
  const found: string[] = [];
  let current = { start: -1, units: 0 };
  admissions.forEach(({ atMs, cost }, i) => {
    const start = atMs - (atMs % windowMs);
    current = { start, units: (current.start === start ? current.units : 0) + cost };
    if (!lastAtItsTime(admissions, i)) return;
    const previous = perWindow.get(start - windowMs) ?? 0;
    if (current.units * windowMs + previous * (windowMs - (atMs - start)) > limit * windowMs) {
      found.push(
        `${current.units} units admitted at ${atMs} in the window from ${start}, ${previous} in the one before`,
      );
    }
  });
  return found;
}

/** At most `limit` units held at once: a lease holds its units from its admission until `heldUntilMs`. */
function concurrencyExcess(limit: number, admissions: readonly Admission[]): string[] {
  const found: string[] = [];
  let held: Admission[] = [];
  admissions.forEach((lease, i) => {
    held = [...held, lease].filter((h) => (h.heldUntilMs ?? 0) > lease.atMs);
    const units = held.reduce((sum, h) => sum + h.cost, 0);
    if (lastAtItsTime(admissions, i) && units > limit) found.push(`${units} units held at ${lease.atMs}`);
  });
  return found;
}

/**
 * The admissions of one key (sorted by time), split where Redis may have lost its writes: the runs
 * between two losses of its slot, each checked on its own, and none of those made during a loss.
 * A run may start from state Redis kept from before (it forgot only some writes), which can only
 * make it admit less, so each run on its own obeys the invariant exactly.
 */
export function healthyRuns(admissions: readonly Admission[], slot: number, losses: readonly Loss[]): Admission[][] {
  const mine = losses.filter((loss) => loss.slots.some(([start, end]) => start <= slot && slot <= end));
  const runs: Admission[][] = [[]];
  let next = 0;
  for (const admission of admissions) {
    let crossed = false;
    for (; next < mine.length && (mine[next]?.endMs ?? 0) < admission.atMs; next++) crossed = true;
    if (crossed) runs.push([]);
    const loss = mine[next];
    if (loss && loss.startMs <= admission.atMs) continue;
    runs.at(-1)?.push(admission);
  }
  return runs.filter((run) => run.length > 0);
}
