// What the dashboard's recorder costs, in process: decisions per second of one limiter bare, observed
// (observe() with an onDecision that does nothing), and observed by a dashboard, in interleaved rounds
// so that the machine's drift falls on all three alike. Run once, niced:
//   nice npx tsx bench/dashboard.ts [--store memory|redis] [--keys zipf|uniform] [--rounds 7] [--round-ms 1000]
// Counted instead of timed (the same count whatever else the machine does), one variant at a time:
//   valgrind --tool=callgrind --callgrind-out-file=/dev/null node --single-threaded --import tsx \
//     bench/dashboard.ts --only dashboard --decisions 100000
// run with --decisions 0 and N; the difference over N is the instructions per decision.
// Keys: a Zipf stream (s = 1.1) over 100,000 keys, as traffic is skewed; or, the summaries' worst
// case, every call a key drawn uniformly from 100,000, so nearly every one replaces a counter.
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { startRedisServer, type RedisServer } from '../src/cli/redis-server.js';
import {
  createDashboard,
  createLimiter,
  fixedWindow,
  memoryStore,
  observe,
  redisStore,
  type Limiter,
  type Store,
} from '../src/index.js';
import { random, zipf } from '../test/support/zipf.js';

const { values } = parseArgs({
  options: {
    store: { type: 'string', default: 'memory' },
    keys: { type: 'string', default: 'zipf' },
    rounds: { type: 'string', default: '7' },
    only: { type: 'string' },
    decisions: { type: 'string', default: '100000' },
    'round-ms': { type: 'string', default: '1000' },
  },
});
const ROUNDS = Number(values.rounds);
const ROUND_MS = Number(values['round-ms']);
// 64 calls in flight, keys from a stream of 1,000,000 drawn in advance.
const IN_FLIGHT = 64;
const KEYS = Array.from({ length: 100_000 }, (_, i) => `user:${i}`);
const next = random(29);
const draw = values.keys === 'uniform' ? () => Math.floor(next() * KEYS.length) : zipf(KEYS.length, 1.1, next);
const STREAM = Array.from({ length: 1_000_000 }, () => KEYS[draw()] as string);
const pick = (i: number) => STREAM[i % STREAM.length] as string;

/** Decisions per second over one round of `ROUND_MS`, by the wall clock and per second of this process's CPU time. */
async function round(limiter: Limiter): Promise<{ wall: number; cpu: number }> {
  let done = 0;
  const started = performance.now();
  const cpuStarted = process.cpuUsage();
  while (performance.now() - started < ROUND_MS) {
    const calls = new Array<Promise<unknown>>(IN_FLIGHT);
    for (let i = 0; i < IN_FLIGHT; i++) calls[i] = limiter.limit(pick(done + i));
    await Promise.all(calls);
    done += IN_FLIGHT;
  }
  const cpu = process.cpuUsage(cpuStarted);
  return { wall: done / ((performance.now() - started) / 1000), cpu: done / ((cpu.user + cpu.system) / 1e6) };
}

/** For callgrind: a warm-up, then `decisions` more, 64 in flight as in the timed rounds. */
async function counted(limiter: Limiter, decisions: number): Promise<void> {
  const batches = async (count: number, from: number) => {
    for (let done = 0; done < count; done += IN_FLIGHT) {
      const calls = new Array<Promise<unknown>>(IN_FLIGHT);
      for (let i = 0; i < IN_FLIGHT; i++) calls[i] = limiter.limit(pick(from + done + i));
      await Promise.all(calls);
    }
  };
  await batches(100_032, 0);
  await batches(decisions, 100_032);
  console.log(`${values.only}: 100,032 decisions to warm up, then ${decisions}`);
}

const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)] as number;

/** Medians by `clock`, and the dashboard's ratios paired by round, so that a slow moment of the machine falls on both sides of each. */
function report(samples: Record<string, { wall: number; cpu: number }[]>, clock: 'wall' | 'cpu'): void {
  const of = (name: string) => (samples[name] as { wall: number; cpu: number }[]).map((sample) => sample[clock]);
  const bare = median(of('bare'));
  console.log(clock === 'wall' ? 'median decisions/s:' : "median decisions per second of the process's CPU time:");
  for (const name of Object.keys(samples)) {
    const m = median(of(name));
    console.log(
      `  ${name.padEnd(10)} ${Math.round(m).toLocaleString('en-US').padStart(10)}  ${((m / bare - 1) * 100).toFixed(1)}% vs bare`,
    );
  }
  const paired = (a: string, b: string) => median(of(a).map((value, r) => value / of(b)[r]!));
  const percent = (ratio: number) => `${((ratio - 1) * 100).toFixed(1)}%`;
  console.log(
    `  dashboard vs observe(): ${percent(paired('dashboard', 'observe()'))}; dashboard vs bare: ${percent(paired('dashboard', 'bare'))}; observe() vs bare: ${percent(paired('observe()', 'bare'))} (medians of per-round ratios)`,
  );
}

async function main(): Promise<void> {
  let server: RedisServer | undefined;
  let client: Redis | undefined;
  let store: Store;
  if (values.store === 'redis') {
    server = await startRedisServer();
    client = new Redis(server.port, '127.0.0.1');
    store = redisStore(client);
  } else store = memoryStore();
  const policy = fixedWindow({ limit: 100, window: '1s', name: 'bench' });
  const variants: Record<string, Limiter> = {
    bare: createLimiter({ store, policy, prefix: 'bare' }),
    'observe()': observe(createLimiter({ store, policy, prefix: 'observed' }), {
      includeKeys: true,
      onDecision: () => undefined,
    }),
    dashboard: createDashboard().observe(createLimiter({ store, policy, prefix: 'dashboard' })),
  };
  if (values.only !== undefined) return counted(variants[values.only] as Limiter, Number(values.decisions));
  const samples: Record<string, { wall: number; cpu: number }[]> = Object.fromEntries(
    Object.keys(variants).map((name) => [name, []]),
  );
  // One warm-up round each, not counted: the JIT settles before anything is measured.
  for (const limiter of Object.values(variants)) await round(limiter);
  for (let r = 0; r < ROUNDS; r++) {
    // Each round in another order, so none always runs first.
    const names = Object.keys(variants);
    for (let i = 0; i < names.length; i++) {
      const name = names[(i + r) % names.length] as string;
      samples[name]?.push(await round(variants[name] as Limiter));
    }
  }
  console.log(`store ${values.store}, keys ${values.keys}, ${ROUNDS} rounds of ${ROUND_MS} ms, ${IN_FLIGHT} in flight`);
  for (const clock of ['wall', 'cpu'] as const) report(samples, clock);
  client?.disconnect();
  await server?.stop();
}

await main();
