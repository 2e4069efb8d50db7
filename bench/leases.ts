/**
 * Quota leases on one hot key (docs/leases.md): 4 processes, each with IN_FLIGHT calls in flight
 * on the key for RUN_MS, through a limiter without a lease and then with one, for each algorithm
 * that leases. Prints decisions/s, Redis calls per decision (the scripts INFO commandstats counts:
 * one per call a limiter makes to the store), and what was admitted against what the policy allows: over-admission
 * must be 0. `npm run bench:leases` (run it niced on a shared machine).
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { Redis } from 'ioredis';
import { startRedisServer } from '../src/cli/redis-server.js';
import { createLimiter, fixedWindow, gcra, redisStore, slidingWindow, tokenBucket, type Policy } from '../src/index.js';

const PROCESSES = 4;
const IN_FLIGHT = 32;
const RUN_MS = 3_000;

/** Each algorithm at a hot key's limit, and the lease it takes: above what 4 processes ask, but for gcra (its fastest rate). */
const CASES: Record<string, { policy: () => Policy; units: number; perMs: number; burst: number }> = {
  fixedWindow: {
    policy: () => fixedWindow({ limit: 2_000_000, window: '1s' }),
    units: 1_000,
    perMs: 0,
    burst: 2_000_000,
  },
  slidingWindow: {
    policy: () => slidingWindow({ limit: 2_000_000, window: '1s' }),
    units: 1_000,
    perMs: 0,
    burst: 2_000_000,
  },
  tokenBucket: {
    policy: () => tokenBucket({ capacity: 2_000_000, refillPerSecond: 1_000_000 }),
    units: 1_000,
    perMs: 1_000,
    burst: 2_000_000,
  },
  // gcra's finest rate, one request per 500 µs: below what one process decides, so its hot key is denied most of the time.
  gcra: { policy: () => gcra({ limit: 2_000, period: '1s' }), units: 20, perMs: 2, burst: 2_000 },
};

interface Result {
  decisions: number;
  admitted: number;
  /** Admitted per window of the store's charge (windows), for the check. */
  windows: Record<string, number>;
}

async function child(url: string, prefix: string, name: string, leased: boolean): Promise<void> {
  const redis = new Redis(url);
  await redis.ping();
  const c = CASES[name] as (typeof CASES)[string];
  const limiter = createLimiter({
    store: redisStore(redis),
    prefix,
    policy: c.policy(),
    ...(leased ? { lease: { units: c.units, ms: '1s' } } : {}),
  });
  process.send?.('ready');
  await once(process, 'message');
  const result: Result = { decisions: 0, admitted: 0, windows: {} };
  const end = performance.now() + RUN_MS;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (performance.now() < end) {
        const decision = await limiter.limit('hot');
        result.decisions++;
        if (!decision.allowed) continue;
        result.admitted++;
        const window = String(Math.floor((decision.decidedAt ?? 0) / 1000));
        result.windows[window] = (result.windows[window] ?? 0) + 1;
      }
    }),
  );
  await limiter.close();
  process.send?.(result);
  await redis.quit();
  process.disconnect?.();
}

/** The scripts Redis has run (each limiter call to the store is one EVALSHA, or EVAL the first time). */
async function scriptCalls(redis: Redis): Promise<number> {
  const info = await redis.info('commandstats');
  return [...info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
}

async function measure(url: string, redis: Redis, name: string, leased: boolean) {
  const prefix = `bench-${name}-${leased ? 'leased' : 'plain'}-${Date.now()}`;
  const children = Array.from({ length: PROCESSES }, () =>
    fork(new URL(import.meta.url), ['child', url, prefix, name, String(leased)], { execArgv: ['--import', 'tsx'] }),
  );
  // A child that exits before it answers fails the bench, rather than leaving it waiting.
  const failed = Promise.race(
    children.map((c) =>
      once(c, 'exit').then(([code]) =>
        code === 0 ? new Promise<never>(() => {}) : Promise.reject(new Error(`a child exited with ${String(code)}`)),
      ),
    ),
  );
  await Promise.race([Promise.all(children.map((c) => once(c, 'message'))), failed]);
  const before = await scriptCalls(redis);
  const startedAt = Date.now();
  const results = children.map((c) => once(c, 'message').then(([m]) => m as Result));
  for (const c of children) c.send('go');
  const all = await Promise.race([Promise.all(results), failed]);
  const elapsedMs = Date.now() - startedAt;
  const sent = (await scriptCalls(redis)) - before;
  const decisions = all.reduce((s, r) => s + r.decisions, 0);
  const admitted = all.reduce((s, r) => s + r.admitted, 0);
  const c = CASES[name] as (typeof CASES)[string];
  let over: number;
  if (c.perMs === 0) {
    const perWindow = new Map<string, number>();
    for (const r of all) for (const [w, n] of Object.entries(r.windows)) perWindow.set(w, (perWindow.get(w) ?? 0) + n);
    over = Math.max(0, ...[...perWindow.values()].map((n) => n - c.burst));
  } else over = Math.max(0, admitted - (c.burst + c.perMs * elapsedMs));
  return { decisionsPerSecond: (decisions * 1000) / RUN_MS, commandsPerDecision: sent / decisions, admitted, over };
}

if (process.argv[2] === 'child') {
  const [url = '', prefix = '', name = '', leased] = process.argv.slice(3);
  await child(url, prefix, name, leased === 'true');
} else {
  const server = await startRedisServer();
  const redis = new Redis(server.url);
  try {
    console.log(`${PROCESSES} processes × ${IN_FLIGHT} in flight on one key, ${RUN_MS / 1000} s each`);
    console.log('algorithm      lease          decisions/s  Redis calls/decision  admitted  over-admitted  speed-up');
    for (const name of Object.keys(CASES)) {
      const plain = await measure(server.url, redis, name, false);
      const leased = await measure(server.url, redis, name, true);
      const units = (CASES[name] as (typeof CASES)[string]).units;
      for (const [label, r] of [
        ['none', plain],
        [`${units} units`, leased],
      ] as const) {
        console.log(
          `${name.padEnd(14)} ${label.padEnd(14)} ${Math.round(r.decisionsPerSecond).toLocaleString('en').padStart(11)}  ${r.commandsPerDecision.toFixed(4).padStart(19)}  ${r.admitted.toLocaleString('en').padStart(8)}  ${String(r.over).padStart(13)}  ${r === leased ? `${(leased.decisionsPerSecond / plain.decisionsPerSecond).toFixed(1)}x` : ''}`,
        );
      }
    }
  } finally {
    await redis.quit();
    await server.stop();
  }
}
