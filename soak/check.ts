import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { callKeys } from '../src/core/keys.js';
import { hashSlot } from '../src/stores/slot.js';
import { readHistory, type CallRecord, type FaultKind, type NodeRecord, type Timed } from './history.js';
import { soakLimiters, TIMEOUT_MS, type Invariant } from './plan.js';
import { enginePolicy } from '../src/engine/algorithm.js';
import { LeaseLedger, type LeaseTotals } from './lease-ledger.js';

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

export type ViolationKind =
  | 'over the limit'
  | 'over its lease'
  | 'key without TTL'
  | 'answered late'
  | 'call rejected'
  | 'memory over its bound'
  | 'worker failed';

export interface Summary {
  calls: number;
  /** Decided by Redis. */
  admitted: number;
  denied: number;
  /** Answered by the failure policy, by reason. */
  failurePolicy: Record<string, number>;
  faults: Record<FaultKind, number>;
  /** Admissions checked against their limit, and those left out because Redis may have lost them. */
  checkedAdmissions: number;
  admissionsDuringLosses: number;
  /** The leased limiters' store steps and units (soak/lease-ledger.ts). */
  leases: LeaseTotals;
  /** The slowest answer; the latest a timeout timer fired (the event loop's delay); the longest an answer came after it. */
  slowestMs: number;
  worstTimerLateMs: number;
  worstAfterTimerMs: number;
  maxWorkerHeapBytes: number;
  maxWorkerRssBytes: number;
  maxNodeMemoryBytes: number;
  /** Master scans for keys without a TTL, and the most keys one scan found on one master. */
  ttlScans: number;
  mostKeys: number;
  violations: Partial<Record<ViolationKind, { count: number; examples: string[] }>>;
}

/** Reads a run's directory and checks every invariant (see docs/reliability.md, "Chaos soak"). */
export async function checkRun(dir: string, prefix: string, workerFailures: readonly string[]): Promise<Summary> {
  const ledger = new LeaseLedger();
  const summary: Summary = {
    calls: 0,
    admitted: 0,
    denied: 0,
    failurePolicy: {},
    faults: { kill: 0, failover: 0, partition: 0, pause: 0, 'script-flush': 0, 'worker-kill': 0 },
    checkedAdmissions: 0,
    admissionsDuringLosses: 0,
    leases: ledger.totals,
    slowestMs: 0,
    worstTimerLateMs: 0,
    worstAfterTimerMs: 0,
    maxWorkerHeapBytes: 0,
    maxWorkerRssBytes: 0,
    maxNodeMemoryBytes: 0,
    ttlScans: 0,
    mostKeys: 0,
    violations: {},
  };
  const violation = (kind: ViolationKind, example: string) => {
    const seen = (summary.violations[kind] ??= { count: 0, examples: [] });
    seen.count++;
    if (seen.examples.length < 3) seen.examples.push(example);
  };
  workerFailures.forEach((failure) => violation('worker failed', failure));

  const timely = (what: string, call: Timed) => {
    const tookMs = call.endMs - call.startMs;
    summary.slowestMs = Math.max(summary.slowestMs, tookMs);
    summary.worstTimerLateMs = Math.max(summary.worstTimerLateMs, call.timerLateMs ?? 0);
    summary.worstAfterTimerMs = Math.max(summary.worstAfterTimerMs, call.afterTimerMs ?? 0);
    if ((call.afterTimerMs ?? 0) > ANSWER_SLACK_MS) {
      violation(
        'answered late',
        `${what} took ${tookMs.toFixed(1)} ms, ${call.afterTimerMs?.toFixed(1)} ms after its timeout's timer (itself ${call.timerLateMs?.toFixed(1)} ms late)`,
      );
    }
  };

  const admissions = new Map<string, Admission[]>();
  const admitted = (limiter: string, key: string, admission: Admission) => {
    const id = `${limiter}\n${key}`;
    let list = admissions.get(id);
    if (!list) admissions.set(id, (list = []));
    list.push(admission);
  };
  const admit = (record: CallRecord, serverMs: number) => {
    const soak = soakLimiters.find((l) => l.name === record.limiter);
    if (!soak) throw new Error(`unknown limiter ${record.limiter} in the history`);
    // Redis counted a leased limiter's units at their take, which the ledger checks it against.
    if (soak.lease !== undefined) {
      ledger.admitted(record, serverMs);
      return;
    }
    let heldUntilMs: number | undefined;
    if (soak.invariant.kind === 'concurrency') {
      const { release } = record;
      const expiresMs = serverMs + soak.invariant.leaseMs;
      // A release the failure policy answered freed the slot at an unknown time (or never): such
      // a lease is left out, which can only hide an excess, never invent one.
      if (release?.outcome === 'failed') return;
      const misread = release?.serverMs === undefined ? undefined : misreadServerTime(release.serverMs, release);
      if (misread !== undefined) {
        violation(
          'worker failed',
          `release of ${record.limiter} "${record.key}" (worker ${record.worker}): ${misread}`,
        );
        return;
      }
      heldUntilMs =
        release?.outcome === 'released' && release.serverMs !== undefined
          ? Math.min(release.serverMs, expiresMs)
          : expiresMs;
    }
    admitted(record.limiter, record.key, {
      atMs: serverMs,
      cost: record.cost,
      ...(heldUntilMs !== undefined && { heldUntilMs }),
    });
  };

  const losses: Loss[] = [];
  for (const file of (await readdir(dir)).filter((name) => name.endsWith('.jsonl')).sort()) {
    for await (const record of readHistory(join(dir, file))) {
      switch (record.type) {
        case 'call': {
          summary.calls++;
          const what = `${record.limiter} "${record.key}" (worker ${record.worker})`;
          timely(what, record);
          if (record.release) timely(`release of ${what}`, record.release);
          if (record.outcome === 'rejected') {
            violation('call rejected', `${what}: ${record.error ?? ''}`);
          } else if (record.reason !== undefined) {
            summary.failurePolicy[record.reason] = (summary.failurePolicy[record.reason] ?? 0) + 1;
          } else if (record.outcome === 'denied') {
            summary.denied++;
          } else {
            summary.admitted++;
            const { serverMs } = record;
            const misread = serverMs === undefined ? 'without its time' : misreadServerTime(serverMs, record);
            if (serverMs !== undefined && misread === undefined) admit(record, serverMs);
            else violation('worker failed', `${what}: admitted by Redis ${misread}`);
          }
          break;
        }
        case 'memory':
          summary.maxWorkerHeapBytes = Math.max(summary.maxWorkerHeapBytes, record.heapUsedBytes);
          summary.maxWorkerRssBytes = Math.max(summary.maxWorkerRssBytes, record.rssBytes);
          if (record.heapUsedBytes > WORKER_HEAP_BOUND_BYTES)
            violation(
              'memory over its bound',
              `worker ${record.worker} heap ${record.heapUsedBytes} B at ${record.atMs}`,
            );
          break;
        case 'fault':
          summary.faults[record.kind]++;
          if (record.lostSlots)
            losses.push({ startMs: record.startMs, endMs: record.endMs + LOSS_MARGIN_MS, slots: record.lostSlots });
          break;
        case 'node':
          checkNode(record);
          break;
        case 'step':
          ledger.step(record);
          break;
        case 'step-end':
          ledger.end(record);
          break;
      }
    }
  }
  const counted = ledger.settle(
    (example) => violation('over its lease', example),
    (example) => violation('worker failed', example),
  );
  for (const { limiter, key, atMs, cost } of counted) admitted(limiter, key, { atMs, cost });

  function checkNode(record: NodeRecord) {
    summary.ttlScans++;
    summary.mostKeys = Math.max(summary.mostKeys, record.keys);
    summary.maxNodeMemoryBytes = Math.max(summary.maxNodeMemoryBytes, record.usedMemoryBytes);
    for (const key of record.ttlLess) violation('key without TTL', `${key} on node ${record.port} at ${record.atMs}`);
    if (record.usedMemoryBytes > NODE_MEMORY_BOUND_BYTES)
      violation(
        'memory over its bound',
        `node ${record.port} used_memory ${record.usedMemoryBytes} B at ${record.atMs}`,
      );
  }

  losses.sort((a, b) => a.startMs - b.startMs);
  for (const [id, list] of admissions) {
    const [name = '', key = ''] = id.split('\n');
    const soak = soakLimiters.find((l) => l.name === name);
    if (!soak) continue;
    list.sort((a, b) => a.atMs - b.atMs);
    const slot = hashSlot(callKeys(prefix, key, [enginePolicy(soak.policy)])[0] ?? '');
    const runs = healthyRuns(list, slot, losses);
    const checked = runs.reduce((sum, run) => sum + run.length, 0);
    summary.checkedAdmissions += checked;
    summary.admissionsDuringLosses += list.length - checked;
    for (const run of runs)
      for (const excess of overLimit(soak.invariant, run)) violation('over the limit', `${name} "${key}": ${excess}`);
  }
  return summary;
}

/** The summary as lines for a terminal. */
export function formatSummary(s: Summary): string {
  const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MB`;
  const kinds = (counts: Record<string, number>) =>
    Object.entries(counts)
      .map(([kind, n]) => `${kind} ${n}`)
      .join(', ') || 'none';
  const faults = Object.values(s.faults).reduce((a, b) => a + b, 0);
  const violations = Object.entries(s.violations);
  return [
    `calls: ${s.calls} (decided by Redis: ${s.admitted} admitted, ${s.denied} denied; by the failure policy: ${kinds(s.failurePolicy)})`,
    `faults injected: ${faults} (${kinds(s.faults)})`,
    `admissions checked against their limit: ${s.checkedAdmissions}; made while Redis may have lost writes (not checked): ${s.admissionsDuringLosses}`,
    `leases: ${s.leases.takes} steps took ${s.leases.unitsTaken} units, calls admitted ${s.leases.unitsAdmitted} of them; ${s.leases.unitsReturned} given back (${s.leases.unitsReturnedUnknown} by a step that failed or was never answered, counted as given)`,
    `slowest answer: ${s.slowestMs.toFixed(1)} ms (timeout ${TIMEOUT_MS} ms); a timer for the timeout fired up to ${s.worstTimerLateMs.toFixed(1)} ms late (event-loop delay); answered at most ${s.worstAfterTimerMs.toFixed(1)} ms after it (bound ${ANSWER_SLACK_MS} ms)`,
    `memory: workers' heap at most ${mb(s.maxWorkerHeapBytes)} (RSS ${mb(s.maxWorkerRssBytes)}), nodes' used_memory at most ${mb(s.maxNodeMemoryBytes)}`,
    `TTL scans: ${s.ttlScans} (up to ${s.mostKeys} keys on a master)`,
    `invariant violations: ${violations.reduce((sum, [, v]) => sum + v.count, 0)}`,
    ...violations.flatMap(([kind, v]) => [`  ${kind}: ${v.count}`, ...v.examples.map((e) => `    e.g. ${e}`)]),
  ].join('\n');
}
