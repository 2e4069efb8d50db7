import { performance } from 'node:perf_hooks';

/** The client keys of a load: one hot key, or `count` distinct ones. */
export function keysFor(count: number): string[] {
  return count === 1 ? ['hot'] : Array.from({ length: count }, (_, i) => `user:${i}`);
}

/** What one contender did in one timed run. */
export interface Sample {
  readonly decisionsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** CPU time the Redis server spent per decision (user + system, µs), for a contender measured alone on it. */
  readonly redisCpuUs?: number;
}

/** One decision: resolves when the contender has answered (allowed or denied alike). */
export type Decide = (key: string) => Promise<unknown>;

// Enough room for every latency of a run; past it the oldest are overwritten (a ring), which keeps
// the percentiles of a long run honest without allocating while measuring.
const LATENCY_SLOTS = 1 << 20;
const latencies = new Float64Array(LATENCY_SLOTS);

function percentile(sorted: Float64Array, fraction: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))] ?? 0;
}

/** One closed-loop run as it was: how many decisions, over how long, and each one's latency. */
export interface Run {
  readonly done: number;
  readonly elapsedMs: number;
  /** The latencies in milliseconds, the last LATENCY_SLOTS of them if there were more. */
  readonly latencies: Float64Array;
}

/**
 * Closed loop: `inFlight` workers each await one decision, then start the next, until `durationMs`
 * has passed. Keys are taken in turn from `keys`, so every key sees the same load.
 */
export async function run(decide: Decide, keys: readonly string[], inFlight: number, durationMs: number): Promise<Run> {
  let next = 0;
  let done = 0;
  const start = performance.now();
  const deadline = start + durationMs;
  async function worker(): Promise<void> {
    for (;;) {
      const began = performance.now();
      if (began >= deadline) return;
      const key = keys[next++ % keys.length] as string;
      await decide(key);
      latencies[done++ % LATENCY_SLOTS] = performance.now() - began;
    }
  }
  await Promise.all(Array.from({ length: inFlight }, worker));
  return { done, elapsedMs: performance.now() - start, latencies: latencies.slice(0, Math.min(done, LATENCY_SLOTS)) };
}

/**
 * Open loop at `perSecond`: calls are started on schedule (checked every millisecond), each without
 * waiting for the others, for `durationMs`; resolves once every call started is answered.
 */
export async function paced(
  decide: Decide,
  keys: readonly string[],
  perSecond: number,
  durationMs: number,
): Promise<Run> {
  let started = 0;
  let done = 0;
  const answered: Promise<void>[] = [];
  const start = performance.now();
  for (let now = start; now - start < durationMs; now = performance.now()) {
    const due = Math.floor(((now - start) * perSecond) / 1000);
    for (; started < due; started++) {
      const key = keys[started % keys.length] as string;
      answered.push(
        decide(key).then(() => {
          latencies[done++ % LATENCY_SLOTS] = performance.now() - now;
        }),
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await Promise.all(answered);
  return { done, elapsedMs: performance.now() - start, latencies: latencies.slice(0, Math.min(done, LATENCY_SLOTS)) };
}

/**
 * Runs that went on at the same time (from several processes) as one sample: their decisions/s
 * add up, and the percentiles are those of all their latencies together.
 */
export function combine(runs: readonly Run[]): Sample {
  const all = new Float64Array(runs.reduce((sum, r) => sum + r.latencies.length, 0));
  let at = 0;
  for (const r of runs) {
    all.set(r.latencies, at);
    at += r.latencies.length;
  }
  all.sort();
  return {
    decisionsPerSecond: runs.reduce((sum, r) => sum + (r.done * 1000) / r.elapsedMs, 0),
    p50Ms: percentile(all, 0.5),
    p99Ms: percentile(all, 0.99),
  };
}

/** run() in this process alone, as a sample. */
export async function measure(
  decide: Decide,
  keys: readonly string[],
  inFlight: number,
  durationMs: number,
): Promise<Sample> {
  return combine([await run(decide, keys, inFlight, durationMs)]);
}

/** What an in-process loop did: decisions per second of wall time, and per second of this process's CPU time. */
export interface InProcessRate {
  readonly perSecond: number;
  /** Less moved by other processes on a busy machine than perSecond: they take turns, not CPU time. */
  readonly perCpuSecond: number;
}

/**
 * In-process stores answer without I/O: a tight loop of awaited decisions, one at a time, checking
 * the clock only every `batch` decisions so that reading it costs nothing measurable.
 */
export async function measureInProcess(
  decide: Decide,
  keys: readonly string[],
  durationMs: number,
): Promise<InProcessRate> {
  const batch = 1000;
  let done = 0;
  let next = 0;
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  const deadline = start + durationMs;
  while (performance.now() < deadline) {
    for (let i = 0; i < batch; i++) {
      await decide(keys[next++ % keys.length] as string);
    }
    done += batch;
  }
  const elapsedMs = performance.now() - start;
  const cpu = process.cpuUsage(cpuBefore);
  return { perSecond: (done * 1000) / elapsedMs, perCpuSecond: (done * 1e6) / (cpu.user + cpu.system) };
}

/** The middle value; for an even count, the mean of the two middle ones. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  if (sorted.length === 0) return 0;
  if (sorted.length % 2 === 1) return sorted[middle] as number;
  return ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** (max - min) / median, in percent: how much the runs disagreed. */
export function spreadPercent(values: readonly number[]): number {
  const m = median(values);
  if (values.length < 2 || m === 0) return 0;
  return ((Math.max(...values) - Math.min(...values)) / m) * 100;
}
