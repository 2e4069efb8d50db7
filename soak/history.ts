import { closeSync, createReadStream, openSync, writeSync } from 'node:fs';
import { createInterface } from 'node:readline';
import type { FailureReason } from '../src/index.js';

/*
 * What a soak run leaves in its directory, one JSON object a line: each worker's calls and memory
 * (worker-<n>.jsonl), the faults injected (faults.jsonl) and what was seen on the nodes
 * (nodes.jsonl). The checker reads nothing else.
 *
 * Times: `serverMs` is the Redis TIME a script decided at; the faults and node samples are stamped
 * with Date.now(), the same wall clock on this one machine. A worker's `startMs` and `endMs` come
 * from its monotonic clock (performance.timeOrigin + performance.now()): their difference is an
 * exact duration, and they agree with the wall clock to within its drift since the worker started.
 *
 * A leased limiter decides most calls without Redis, from units a store step took earlier, and
 * gives units back in steps of its own: its worker writes each step it sends to Redis (`step`,
 * before sending) and what came of it (`step-end`), so a worker killed in between leaves a step
 * whose outcome is unknown, never one it took effect without a trace of.
 */

/** A call to Redis made through a limiter, as a worker saw it. */
export interface Timed {
  readonly startMs: number;
  readonly endMs: number;
  /**
   * For a call still waiting when a timer set for the limiter's timeout + 1 ms at its start fired: how
   * late that timer fired (the event loop's delay) and how long after it the call was answered.
   */
  readonly timerLateMs?: number;
  readonly afterTimerMs?: number;
}

export interface ReleaseRecord extends Timed {
  /** `failed`: the failure policy answered, so when (or whether) Redis freed the slot is unknown. */
  readonly outcome: 'released' | 'not-held' | 'failed';
  readonly serverMs?: number;
}

export interface CallRecord extends Timed {
  readonly type: 'call';
  readonly worker: number;
  readonly limiter: string;
  readonly key: string;
  readonly cost: number;
  /** `rejected`: the call rejected instead of resolving with a decision. */
  readonly outcome: 'allowed' | 'denied' | 'rejected';
  /** Set when the failure policy answered (decision.reason). */
  readonly reason?: FailureReason;
  /**
   * When Redis decided; absent when the failure policy answered. A leased limiter's call: the
   * server time of the step whose units it used (decision.decidedAt), its own or its lease's take.
   */
  readonly serverMs?: number;
  readonly error?: string;
  /** A concurrency lease: how it was given back; absent when it was left to expire. */
  readonly release?: ReleaseRecord;
}

/**
 * A store step a leased limiter sent: a `take` (a lease: up to `cost` units, as many as fit down to
 * the request's cost), a `limit` (a request asked alone) or a `refund` (a lease's give-back).
 */
export interface StepRecord {
  readonly type: 'step';
  readonly worker: number;
  /** The step's number in its worker, which its `step-end` repeats. */
  readonly id: number;
  readonly limiter: string;
  readonly key: string;
  readonly op: string;
  /** The units it asks for (take: the most; limit) or gives back (refund). */
  readonly cost: number;
  /** A refund: the server time the units were charged at, its take's (the decision's decidedAt). */
  readonly chargedAtMs?: number;
  readonly startMs: number;
}

/** What came of a step: Redis's reply, or the store's error. */
export interface StepEndRecord {
  readonly type: 'step-end';
  readonly worker: number;
  readonly id: number;
  readonly endMs: number;
  /** Replied: when Redis ran it, and whether it admitted (take, limit) or gave anything back (refund). */
  readonly serverMs?: number;
  readonly allowed?: boolean;
  /** A take that admitted: the units it took. */
  readonly taken?: number;
  /** Rejected: the store's error; whether Redis ran it is unknown. */
  readonly error?: string;
}

export interface MemoryRecord {
  readonly type: 'memory';
  readonly worker: number;
  readonly atMs: number;
  readonly rssBytes: number;
  readonly heapUsedBytes: number;
}

/** `worker-kill`: a worker SIGKILLed (its leases never given back), a spare started before the faults in its place. */
export type FaultKind = 'kill' | 'failover' | 'partition' | 'pause' | 'script-flush' | 'worker-kill';

export interface FaultRecord {
  readonly type: 'fault';
  readonly kind: FaultKind;
  /** The node it hit (script-flush: every node, 0; worker-kill: none, 0). */
  readonly port: number;
  /** worker-kill: the worker killed. */
  readonly worker?: number;
  readonly startMs: number;
  /** When it was over and the cluster settled again. */
  readonly endMs: number;
  /** The slot ranges whose writes it may have lost: the killed master's. */
  readonly lostSlots?: readonly (readonly [number, number])[];
}

export interface NodeRecord {
  readonly type: 'node';
  readonly port: number;
  readonly atMs: number;
  readonly usedMemoryBytes: number;
  /** Keys under the soak's prefix on this master (0 on a replica, which is not scanned). */
  readonly keys: number;
  /** Keys found with PTTL -1. */
  readonly ttlLess: readonly string[];
}

export type HistoryRecord = CallRecord | StepRecord | StepEndRecord | MemoryRecord | FaultRecord | NodeRecord;

/**
 * Appends records to a file, one JSON line each, written before write() returns: a process
 * SIGKILLed later loses none of them (a stream's buffer would lose its tail).
 */
export function historyWriter(path: string) {
  const fd = openSync(path, 'w');
  return {
    write(record: HistoryRecord): void {
      writeSync(fd, `${JSON.stringify(record)}\n`);
    },
    close(): void {
      closeSync(fd);
    },
  };
}

/** The records of one history file, in the order written. */
export async function* readHistory(path: string): AsyncGenerator<HistoryRecord> {
  for await (const line of createInterface({ input: createReadStream(path), crlfDelay: Infinity })) {
    if (line !== '') yield JSON.parse(line) as HistoryRecord;
  }
}
