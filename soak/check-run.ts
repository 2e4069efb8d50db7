import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { callKeys } from '../src/core/keys.js';
import { enginePolicy } from '../src/engine/algorithm.js';
import { hashSlot } from '../src/stores/slot.js';
import {
  ANSWER_SLACK_MS,
  healthyRuns,
  LOSS_MARGIN_MS,
  misreadServerTime,
  NODE_MEMORY_BOUND_BYTES,
  overLimit,
  WORKER_HEAP_BOUND_BYTES,
  type Admission,
  type Loss,
} from './check.js';
import {
  readHistory,
  type CallRecord,
  type FaultKind,
  type HistoryRecord,
  type NodeRecord,
  type Timed,
} from './history.js';
import { LeaseLedger, type LeaseTotals } from './lease-ledger.js';
import { soakLimiters, TIMEOUT_MS } from './plan.js';

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

/** A run's history, taken record by record: the summary so far, and each key's admissions to check at the end. */
class RunCheck {
  private readonly ledger = new LeaseLedger();
  /** Each limiter's and key's admissions, by `limiter\nkey`. */
  private readonly admissions = new Map<string, Admission[]>();
  private readonly losses: Loss[] = [];
  readonly summary: Summary = {
    calls: 0,
    admitted: 0,
    denied: 0,
    failurePolicy: {},
    faults: { kill: 0, failover: 0, partition: 0, pause: 0, 'script-flush': 0, 'worker-kill': 0 },
    checkedAdmissions: 0,
    admissionsDuringLosses: 0,
    leases: this.ledger.totals,
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

  violation(kind: ViolationKind, example: string): void {
    const seen = (this.summary.violations[kind] ??= { count: 0, examples: [] });
    seen.count++;
    if (seen.examples.length < 3) seen.examples.push(example);
  }

  take(record: HistoryRecord): void {
    const { summary } = this;
    switch (record.type) {
      case 'call':
        return this.call(record);
      case 'memory':
        summary.maxWorkerHeapBytes = Math.max(summary.maxWorkerHeapBytes, record.heapUsedBytes);
        summary.maxWorkerRssBytes = Math.max(summary.maxWorkerRssBytes, record.rssBytes);
        if (record.heapUsedBytes > WORKER_HEAP_BOUND_BYTES)
          this.violation(
            'memory over its bound',
            `worker ${record.worker} heap ${record.heapUsedBytes} B at ${record.atMs}`,
          );
        return;
      case 'fault':
        summary.faults[record.kind]++;
        if (record.lostSlots)
          this.losses.push({ startMs: record.startMs, endMs: record.endMs + LOSS_MARGIN_MS, slots: record.lostSlots });
        return;
      case 'node':
        return this.node(record);
      case 'step':
        return this.ledger.step(record);
      case 'step-end':
        return this.ledger.end(record);
    }
  }

  private call(record: CallRecord): void {
    const { summary } = this;
    summary.calls++;
    const what = `${record.limiter} "${record.key}" (worker ${record.worker})`;
    this.timely(what, record);
    if (record.release) this.timely(`release of ${what}`, record.release);
    if (record.outcome === 'rejected') {
      this.violation('call rejected', `${what}: ${record.error ?? ''}`);
    } else if (record.reason !== undefined) {
      summary.failurePolicy[record.reason] = (summary.failurePolicy[record.reason] ?? 0) + 1;
    } else if (record.outcome === 'denied') {
      summary.denied++;
    } else {
      summary.admitted++;
      const { serverMs } = record;
      const misread = serverMs === undefined ? 'without its time' : misreadServerTime(serverMs, record);
      if (serverMs !== undefined && misread === undefined) this.admit(record, serverMs);
      else this.violation('worker failed', `${what}: admitted by Redis ${misread}`);
    }
  }

  private timely(what: string, call: Timed): void {
    const { summary } = this;
    const tookMs = call.endMs - call.startMs;
    summary.slowestMs = Math.max(summary.slowestMs, tookMs);
    summary.worstTimerLateMs = Math.max(summary.worstTimerLateMs, call.timerLateMs ?? 0);
    summary.worstAfterTimerMs = Math.max(summary.worstAfterTimerMs, call.afterTimerMs ?? 0);
    if ((call.afterTimerMs ?? 0) > ANSWER_SLACK_MS) {
      this.violation(
        'answered late',
        `${what} took ${tookMs.toFixed(1)} ms, ${call.afterTimerMs?.toFixed(1)} ms after its timeout's timer (itself ${call.timerLateMs?.toFixed(1)} ms late)`,
      );
    }
  }

  /** An admission Redis decided at `serverMs`: to check against its limit, or against its lease. */
  private admit(record: CallRecord, serverMs: number): void {
    const soak = soakLimiters.find((l) => l.name === record.limiter);
    if (!soak) throw new Error(`unknown limiter ${record.limiter} in the history`);
    // Redis counted a leased limiter's units at their take, which the ledger checks it against.
    if (soak.lease !== undefined) return this.ledger.admitted(record, serverMs);
    let heldUntilMs: number | undefined;
    if (soak.invariant.kind === 'concurrency') {
      const { release } = record;
      const expiresMs = serverMs + soak.invariant.leaseMs;
      // A release the failure policy answered freed the slot at an unknown time (or never): such
      // a lease is left out, which can only hide an excess, never invent one.
      if (release?.outcome === 'failed') return;
      const misread = release?.serverMs === undefined ? undefined : misreadServerTime(release.serverMs, release);
      if (misread !== undefined)
        return this.violation(
          'worker failed',
          `release of ${record.limiter} "${record.key}" (worker ${record.worker}): ${misread}`,
        );
      heldUntilMs =
        release?.outcome === 'released' && release.serverMs !== undefined
          ? Math.min(release.serverMs, expiresMs)
          : expiresMs;
    }
    this.admitted(record.limiter, record.key, {
      atMs: serverMs,
      cost: record.cost,
      ...(heldUntilMs !== undefined && { heldUntilMs }),
    });
  }

  private admitted(limiter: string, key: string, admission: Admission): void {
    const id = `${limiter}\n${key}`;
    let list = this.admissions.get(id);
    if (!list) this.admissions.set(id, (list = []));
    list.push(admission);
  }

  private node(record: NodeRecord): void {
    const { summary } = this;
    summary.ttlScans++;
    summary.mostKeys = Math.max(summary.mostKeys, record.keys);
    summary.maxNodeMemoryBytes = Math.max(summary.maxNodeMemoryBytes, record.usedMemoryBytes);
    for (const key of record.ttlLess)
      this.violation('key without TTL', `${key} on node ${record.port} at ${record.atMs}`);
    if (record.usedMemoryBytes > NODE_MEMORY_BOUND_BYTES)
      this.violation(
        'memory over its bound',
        `node ${record.port} used_memory ${record.usedMemoryBytes} B at ${record.atMs}`,
      );
  }

  /**
   * Once every record is taken: the leases' units settled into admissions, then each key's
   * admissions checked against its limit, outside the times its slot may have lost writes.
   */
  finish(prefix: string): Summary {
    const { summary } = this;
    const counted = this.ledger.settle(
      (example) => this.violation('over its lease', example),
      (example) => this.violation('worker failed', example),
    );
    for (const { limiter, key, atMs, cost } of counted) this.admitted(limiter, key, { atMs, cost });
    this.losses.sort((a, b) => a.startMs - b.startMs);
    for (const [id, list] of this.admissions) {
      const [name = '', key = ''] = id.split('\n');
      const soak = soakLimiters.find((l) => l.name === name);
      if (!soak) continue;
      list.sort((a, b) => a.atMs - b.atMs);
      const slot = hashSlot(callKeys(prefix, key, [enginePolicy(soak.policy)])[0] ?? '');
      const runs = healthyRuns(list, slot, this.losses);
      const checked = runs.reduce((sum, run) => sum + run.length, 0);
      summary.checkedAdmissions += checked;
      summary.admissionsDuringLosses += list.length - checked;
      for (const run of runs)
        for (const excess of overLimit(soak.invariant, run))
          this.violation('over the limit', `${name} "${key}": ${excess}`);
    }
    return summary;
  }
}

/** Reads a run's directory and checks every invariant (see docs/reliability.md, "Chaos soak"). */
export async function checkRun(dir: string, prefix: string, workerFailures: readonly string[]): Promise<Summary> {
  const check = new RunCheck();
  for (const failure of workerFailures) check.violation('worker failed', failure);
  for (const file of (await readdir(dir)).filter((name) => name.endsWith('.jsonl')).sort())
    for await (const record of readHistory(join(dir, file))) check.take(record);
  return check.finish(prefix);
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
