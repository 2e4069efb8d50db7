import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { RedisServer } from '../../src/cli/redis-server.js';
import { uniquePrefix } from '../support/redis.js';
import { startRedisCluster, type RedisCluster } from '../support/cluster.js';
import { startTestServer } from '../support/servers.js';

const HAMMER = fileURLToPath(new URL('../support/lease-hammer.ts', import.meta.url));
const PROCESSES = 4;
const CALLS = 20_000;
const CONCURRENCY = 16;
// L per window: half a second, so that a run spans several windows (a bucket refills L per window).
const LIMIT = 500;
const WINDOW_MS = 500;
const UNITS = 25;
const LEASE_MS = 1_000;
// Each process takes a lease, then waits this long before it asks again: past a window's end, and
// past the time the bucket takes to refill, while the lease has not ended.
const PAUSE_MS = 600;
// At any moment each process holds at most one lease's unused units: what may go unused.
const BOUND = PROCESSES * UNITS;

interface Run {
  startedAt: number;
  endedAt: number;
  /** Each admitted request: when it was asked, and when the store charged its units (Date.now() and Redis TIME: one clock). */
  admitted: [number, number][];
}

/** Starts a hammer process (niced: the machine is shared) and resolves once it waits for "go". */
async function hammer(args: readonly string[]) {
  const child = spawn('nice', ['-n', '10', process.execPath, '--import', 'tsx', HAMMER, ...args], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = once(child, 'exit') as Promise<[number | null]>;
  while (!output.includes('ready\n')) {
    await Promise.race([
      once(child.stdout, 'data'),
      exited.then(([code]) => assert.fail(`hammer exited with ${code} before it was ready`)),
    ]);
  }
  return {
    go: () => child.stdin.write('go\n'),
    async run(): Promise<Run> {
      const [code] = await exited;
      assert.equal(code, 0, output);
      return JSON.parse(output.slice(output.indexOf('ready\n') + 6)) as Run;
    },
  };
}

async function hammerAll(urls: string, algorithm: string, mode: 'return' | 'forget'): Promise<Run[]> {
  const prefix = uniquePrefix();
  const args = [urls, prefix, algorithm, LIMIT, WINDOW_MS, CALLS, CONCURRENCY, UNITS, LEASE_MS, PAUSE_MS, mode].map(
    String,
  );
  const processes = await Promise.all(Array.from({ length: PROCESSES }, () => hammer(args)));
  for (const p of processes) p.go();
  return Promise.all(processes.map((p) => p.run()));
}

/** The admitted requests per window of their charge; fails if one used a unit of a window that had ended when it was asked. */
function perWindow(runs: readonly Run[]): Map<number, number> {
  const counts = new Map<number, number>();
  for (const [askedAt, chargedAt] of runs.flatMap((r) => r.admitted)) {
    const window = Math.floor(chargedAt / WINDOW_MS);
    assert.ok(
      Math.floor(askedAt / WINDOW_MS) <= window,
      `asked at ${askedAt}, admitted on a unit charged at ${chargedAt}`,
    );
    counts.set(window, (counts.get(window) ?? 0) + 1);
  }
  return counts;
}

/**
 * Checks the admitted requests against the bucket's allowance: at most LIMIT at once, refilled at
 * LIMIT per WINDOW_MS (GCRA over their times). A request is admitted when it was asked, from a lease
 * held then, or when the store charged it, if that was later: the time that matters is the later of
 * the two. Both are whole ms (Date.now(), Redis's TIME): the allowance takes in what a ms refills.
 */
function withinAllowance(runs: readonly Run[]): void {
  const interval = WINDOW_MS / LIMIT;
  const burst = LIMIT + Math.ceil(1 / interval);
  const times = runs.flatMap((r) => r.admitted.map(([askedAt, chargedAt]) => Math.max(askedAt, chargedAt)));
  let tat = 0;
  for (const time of times.sort((a, b) => a - b)) {
    tat = Math.max(tat, time) + interval;
    assert.ok(tat - time <= burst * interval, `more than the allowance at ${time} (${burst} at once)`);
  }
}

/** The span in which every process was asking. */
function allAsking(runs: readonly Run[]) {
  return { from: Math.max(...runs.map((r) => r.startedAt)), to: Math.min(...runs.map((r) => r.endedAt)) };
}

describe(`quota leases: ${PROCESSES} processes × ${CALLS} calls on one key, limit ${LIMIT} per ${WINDOW_MS} ms, leases of ${UNITS}`, () => {
  let server: RedisServer;
  before(async () => {
    server = await startTestServer();
  });
  after(async () => {
    await server.stop();
  });

  for (const algorithm of ['fixedWindow', 'slidingWindow']) {
    it(`${algorithm}: at most ${LIMIT} in every window, at least ${LIMIT} - ${BOUND} in every window all processes asked through`, async () => {
      windowsExact(await hammerAll(server.url, algorithm, 'return'));
    });
  }

  for (const algorithm of ['tokenBucket', 'gcra']) {
    it(`${algorithm}: within the bucket's allowance, at least the allowance - ${BOUND} while all processes asked`, async () => {
      bucketExact(await hammerAll(server.url, algorithm, 'return'));
    });
  }

  for (const algorithm of ['fixedWindow', 'slidingWindow', 'tokenBucket', 'gcra']) {
    it(`${algorithm}: processes that never give a lease back still never admit past the limit`, async () => {
      const runs = await hammerAll(server.url, algorithm, 'forget');
      if (algorithm.endsWith('Window')) {
        for (const [window, count] of perWindow(runs)) assert.ok(count <= LIMIT, `window ${window} admitted ${count}`);
      } else withinAllowance(runs);
    });
  }
});

describe('quota leases on the test cluster (3 masters, 3 replicas): the same runs, leases given back', () => {
  let cluster: RedisCluster;
  let urls = '';
  before(async () => {
    cluster = await startRedisCluster();
    urls = cluster.rootNodes.map((n) => `redis://${n.host}:${n.port}`).join(',');
  });
  after(async () => {
    await cluster.stop();
  });

  for (const algorithm of ['fixedWindow', 'slidingWindow', 'tokenBucket', 'gcra']) {
    it(`${algorithm}: never past the limit, short of it by at most ${BOUND}`, async () => {
      const runs = await hammerAll(urls, algorithm, 'return');
      if (algorithm.endsWith('Window')) windowsExact(runs);
      else bucketExact(runs);
    });
  }
});

/** At most LIMIT in every window; at least LIMIT - BOUND in every window all processes asked through. */
function windowsExact(runs: readonly Run[]): void {
  const counts = perWindow(runs);
  for (const [window, count] of counts) assert.ok(count <= LIMIT, `window ${window} admitted ${count}`);
  const { from, to } = allAsking(runs);
  const full = [...counts.keys()].filter((w) => w * WINDOW_MS >= from && (w + 1) * WINDOW_MS <= to);
  for (const window of full) {
    const count = counts.get(window) ?? 0;
    assert.ok(count >= LIMIT - BOUND, `window ${window} admitted only ${count}`);
  }
}

/** Within the bucket's allowance; at least the allowance - BOUND while all processes asked. */
function bucketExact(runs: readonly Run[]): void {
  withinAllowance(runs);
  const { from, to } = allAsking(runs);
  const total = runs.reduce((sum, r) => sum + r.admitted.length, 0);
  const least = LIMIT + Math.floor(((to - from) * LIMIT) / WINDOW_MS) - BOUND;
  assert.ok(total >= least, `admitted ${total}, less than ${least}`);
}
