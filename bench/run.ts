import { cpus, loadavg } from 'node:os';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { startRedisServer, type RedisServer } from '../src/cli/redis-server.js';
import {
  TYPICAL,
  inProcessContenders,
  incrCeiling,
  plainCounter,
  redisContenders,
  type Contender,
} from './contenders.js';
import { deniedFlood, type FloodResult } from './flood.js';
import { httpTargets, runHttpBenchmarks, type HttpReport } from './http.js';
import { startContender, type ContenderProcess } from './contender-process.js';
import { keysFor, median, type Sample } from './measure.js';
import { limitManyRuns, type ManyResult } from './many.js';
import { renderChart, renderMarkdown } from './report.js';
import { SERVE_IN_FLIGHT, SERVE_LOAD_PROCESSES, benchServe, type ServeBench } from './serve.js';

export interface BenchOptions {
  /**
   * A Redis to measure against; without it the bench starts a private redis-server (recommended).
   * The HTTP part always starts its own, since it flushes it between servers.
   */
  redisUrl?: string;
  /** Small counts and short runs: checks that everything works end to end, measures nothing useful. */
  quick?: boolean;
  /** Timed runs per measurement; the report gives their median. Default 5 (quick: 1). */
  runs?: number;
  /** Where to write benchmarks.md and benchmarks.svg; nothing is written without it. */
  outputDir?: string;
  /** Called with a one-line status before each measurement. */
  onProgress?: (line: string) => void;
}

/** Which load: how many calls are in flight, over how many distinct keys. */
export interface Scenario {
  readonly inFlight: number;
  readonly keys: number;
}

export interface ContenderResult {
  readonly name: string;
  readonly library: Contender['library'];
  /** One entry per scenario, in the order of BenchReport.scenarios: every run's sample. */
  readonly samples: readonly (readonly Sample[])[];
}

export interface Target {
  readonly description: string;
  readonly measured: string;
  readonly met: boolean;
}

export interface BenchReport {
  readonly command: string;
  readonly date: string;
  readonly environment: {
    readonly node: string;
    readonly redis: string;
    readonly cpus: string;
    readonly loadBefore: string;
    readonly loadAfter: string;
  };
  readonly quick: boolean;
  readonly runs: number;
  readonly runMs: number;
  readonly scenarios: readonly Scenario[];
  readonly redis: readonly ContenderResult[];
  /** Ratios taken within each run (the contender over the reference, same scenario), then the median. */
  ratio(contender: string, reference: string, scenario: Scenario): number;
  readonly bytesPerClient: readonly {
    readonly name: string;
    readonly bytes: number;
    readonly memoryUsage: number;
    readonly clients: number;
  }[];
  readonly inProcess: readonly { readonly name: string; readonly decisionsPerSecond: readonly number[] }[];
  readonly many: ManyResult;
  readonly flood: FloodResult;
  /** One `sluice serve` process at SERVE_IN_FLIGHT calls in flight, beside the library in this process. */
  readonly serve: ServeBench;
  /** Behind Express, Fastify and node:http, under autocannon (always on a private redis-server of its own). */
  readonly http: HttpReport;
  readonly targets: readonly Target[];
}

export const BENCH_COMMAND = 'npm ci && npm run bench';

const SCENARIOS: readonly Scenario[] = [1, 64, 256].flatMap((inFlight) => [
  { inFlight, keys: 1 },
  { inFlight, keys: 10_000 },
]);
const MAIN: Scenario = { inFlight: 256, keys: 10_000 };
const FLEXIBLE_REDIS = 'rate-limiter-flexible RateLimiterRedis';
const FLEXIBLE_MEMORY = 'rate-limiter-flexible RateLimiterMemory';
const INCR = 'ioredis INCR';

function sameScenario(a: Scenario, b: Scenario): boolean {
  return a.inFlight === b.inFlight && a.keys === b.keys;
}

// Lua's heap holds the garbage of past scripts until its collector runs, at no fixed time: SCRIPT
// FLUSH empties it, so each reading counts the keys alone (scripts are loaded again on NOSCRIPT).
async function usedMemory(redis: Redis): Promise<number> {
  await redis.script('FLUSH');
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1]);
}

/**
 * Redis `used_memory` per client: two decisions for each of `clients` keys, 100 ms apart (so that a
 * bucket holds a fraction of a token, as it would in use), in an empty database `db` (so each
 * contender pays for growing the key tables alike), before minus after.
 */
export async function bytesPerClient(
  url: string,
  db: number,
  pick: (redis: Redis) => Contender,
  clients: number,
): Promise<{ perClient: number; perKey: number }> {
  const redis = new Redis(url, { db, enableAutoPipelining: true });
  try {
    const contender = pick(redis);
    // Two decisions for each of two keys, as every measured client gets: loads the scripts (sluice's
    // batch script too), opens the database and pays what a server allocates once for a command's
    // first use (Redis 7.0's latency histogram of that command: 25 KB, 2.5 B per client of 10,000)
    // before the first reading.
    for (let pass = 0; pass < 2; pass++)
      await Promise.all([contender.decide('warm-up:1'), contender.decide('warm-up:2')]);
    const before = await usedMemory(redis);
    const keys = keysFor(clients);
    for (const pass of [1, 2]) {
      for (let i = 0; i < keys.length; i += 16) await Promise.all(keys.slice(i, i + 16).map(contender.decide));
      await sleep(pass === 1 ? 100 : 300); // then lets Redis finish rehashing its key tables
    }
    const perClient = ((await usedMemory(redis)) - before) / clients;
    // The keys alone, as MEMORY USAGE sees them (the database holds this contender's keys only).
    const [, sample] = await redis.scan('0', 'COUNT', 200);
    const usages = await Promise.all(sample.map((key) => redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')));
    const perKey = usages.reduce<number>((sum, bytes) => sum + Number(bytes), 0) / Math.max(1, usages.length);
    return { perClient, perKey };
  } finally {
    redis.disconnect();
  }
}

/** Runs every measurement and returns (and, with outputDir, writes) the report. */
export async function runBenchmarks(options: BenchOptions = {}): Promise<BenchReport> {
  const quick = options.quick ?? false;
  const runs = options.runs ?? (quick ? 1 : 5);
  const runMs = quick ? 40 : 1000;
  const warmUpMs = runMs / 4;
  const stops: ContenderProcess[] = [];
  const progress = options.onProgress ?? (() => undefined);
  const loadBefore = loadavg()
    .map((n) => n.toFixed(2))
    .join(' ');
  let server: RedisServer | undefined;
  if (options.redisUrl === undefined) server = await startRedisServer();
  const url = options.redisUrl ?? (server as RedisServer).url;
  const redis = new Redis(url, { enableAutoPipelining: true });
  try {
    const redisVersion = /redis_version:(\S+)/.exec(await redis.info('server'))?.[1] ?? 'unknown';
    // Built here for their names only; each is measured in a process of its own.
    const contenders = await Promise.all(
      [...redisContenders(redis), incrCeiling(redis)].map(({ name }) => startContender({ name, store: url })),
    );
    stops.push(...contenders);
    const samples = contenders.map(() => SCENARIOS.map((): Sample[] => []));
    const total = runs * SCENARIOS.length * contenders.length;
    let step = 0;
    // Round by round, each scenario measures every contender back to back, so that the ratios of
    // one round compare contenders under the same load from the other users of the machine. Each
    // round starts with another contender, so that going first (or after a given one) favours no one.
    for (let run = 0; run < runs; run++) {
      for (const [s, scenario] of SCENARIOS.entries()) {
        for (let turn = 0; turn < contenders.length; turn++) {
          const c = (turn + run) % contenders.length;
          const contender = contenders[c] as ContenderProcess;
          progress(
            `[${++step}/${total}] run ${run + 1}: ${contender.name}, ${scenario.inFlight} in flight, ${scenario.keys} key(s)`,
          );
          // Every contender starts from an empty database, and warms up on its load first.
          await redis.flushdb();
          samples[c]?.[s]?.push(
            await contender.measure({ keys: scenario.keys, inFlight: scenario.inFlight, durationMs: runMs, warmUpMs }),
          );
        }
      }
    }
    const libraries = new Map([...redisContenders(redis), incrCeiling(redis)].map((c) => [c.name, c.library]));
    const redisResults: ContenderResult[] = contenders.map((contender, c) => ({
      name: contender.name,
      library: libraries.get(contender.name) ?? 'sluice',
      samples: samples[c] ?? [],
    }));

    progress('Redis memory per tracked client');
    const clients = quick ? 500 : 10_000;
    const memoryContenders = (client: Redis) => [plainCounter(client), ...redisContenders(client, TYPICAL)];
    const bytes = [];
    for (const [i, contender] of memoryContenders(redis).entries()) {
      // A server of its own for each contender, when the bench starts its own: what one contender
      // leaves in the allocator then never counts for the next (sharing one server, the figures
      // moved by about 2 bytes a client from run to run; apart, by under half a byte).
      const own = options.redisUrl === undefined ? await startRedisServer() : undefined;
      try {
        const pick = (client: Redis) => memoryContenders(client)[i] as Contender;
        const { perClient, perKey } = await bytesPerClient(own?.url ?? url, own ? 0 : i + 1, pick, clients);
        bytes.push({ name: contender.name, clients, bytes: perClient, memoryUsage: perKey });
      } finally {
        await own?.stop();
      }
    }

    const inProcessList = await Promise.all(
      inProcessContenders().map(({ name }) => startContender({ name, store: 'memory' })),
    );
    stops.push(...inProcessList);
    const inProcess = inProcessList.map((contender) => ({ name: contender.name, decisionsPerSecond: [] as number[] }));
    for (let run = 0; run < runs; run++) {
      for (let turn = 0; turn < inProcessList.length; turn++) {
        const i = (turn + run) % inProcessList.length;
        const contender = inProcessList[i] as ContenderProcess;
        progress(`in process, run ${run + 1}: ${contender.name}`);
        inProcess[i]?.decisionsPerSecond.push(
          (await contender.measureInProcess({ keys: 10_000, durationMs: runMs, warmUpMs })).perSecond,
        );
      }
    }
    for (const contender of stops.splice(0)) contender.stop();

    progress('limitMany');
    const many = await limitManyRuns(redis, runs, runMs);

    progress('a flood from one denied key');
    const flood = await deniedFlood(redis, quick ? 2_000 : 20_000);

    progress(`sluice serve: gRPC and /json at ${SERVE_IN_FLIGHT} in flight, and the library in process`);
    const serve = await benchServe({
      inFlight: SERVE_IN_FLIGHT,
      keys: 1000,
      durationMs: runMs,
      runs,
      loadProcesses: SERVE_LOAD_PROCESSES,
      redisUrl: url,
    });
    // Last, and on a redis-server of its own: it runs FLUSHALL between servers.
    const http = await runHttpBenchmarks({ quick, rounds: runs, onProgress: progress });

    const ratio = (contender: string, reference: string, scenario: Scenario): number => {
      const s = SCENARIOS.findIndex((candidate) => sameScenario(candidate, scenario));
      const of = (name: string) => redisResults.find((r) => r.name === name)?.samples[s] ?? [];
      const ours = of(contender);
      const theirs = of(reference);
      return median(
        ours.map((sample, run) => sample.decisionsPerSecond / (theirs[run]?.decisionsPerSecond ?? Number.NaN)),
      );
    };
    const report: BenchReport = {
      command: BENCH_COMMAND,
      date: new Date().toISOString(),
      environment: {
        node: process.version,
        redis: redisVersion,
        cpus: `${cpus().length} x ${cpus()[0]?.model.trim() ?? 'unknown'}`,
        loadBefore,
        loadAfter: loadavg()
          .map((n) => n.toFixed(2))
          .join(' '),
      },
      quick,
      runs,
      runMs,
      scenarios: SCENARIOS,
      redis: redisResults,
      ratio,
      bytesPerClient: bytes,
      inProcess,
      many,
      flood,
      serve,
      http,
      targets: [],
    };
    const withTargets = { ...report, targets: targets(report) };
    if (options.outputDir !== undefined) {
      await mkdir(options.outputDir, { recursive: true });
      await writeFile(join(options.outputDir, 'benchmarks.svg'), renderChart(withTargets));
      await writeFile(join(options.outputDir, 'benchmarks.md'), renderMarkdown(withTargets));
    }
    return withTargets;
  } finally {
    for (const contender of stops) contender.stop();
    redis.disconnect();
    await server?.stop();
  }
}

function times(value: number): string {
  return `${value.toFixed(2)}x`;
}

/** The targets, each judged on this run's numbers. */
function targets(report: BenchReport): Target[] {
  const medianOf = (name: string, scenario: Scenario) => {
    const s = report.scenarios.findIndex((candidate) => sameScenario(candidate, scenario));
    const samples = report.redis.find((r) => r.name === name)?.samples[s] ?? [];
    return {
      perSecond: median(samples.map((x) => x.decisionsPerSecond)),
      p50: median(samples.map((x) => x.p50Ms)),
      redisCpuUs: median(samples.map((x) => x.redisCpuUs ?? Number.NaN)),
    };
  };
  const sluice = report.redis.filter((r) => r.library === 'sluice').map((r) => r.name);
  const list: Target[] = [];
  // The speed targets; an algorithm not listed is held to the strictest.
  const speedup: Record<string, number> = {
    'sluice fixedWindow': 2,
    'sluice gcra': 2,
    'sluice tokenBucket': 1.5,
    'sluice slidingLog': 1.5,
    'sluice slidingWindow': 1.5,
  };
  for (const name of sluice) {
    const wanted = speedup[name] ?? 2;
    const r = report.ratio(name, FLEXIBLE_REDIS, MAIN);
    list.push({
      description: `${name}: >= ${wanted}x RateLimiterRedis, 256 in flight, 10,000 keys`,
      measured: times(r),
      met: r >= wanted,
    });
  }
  const fastest = sluice.map((name) => ({ name, r: report.ratio(name, INCR, MAIN) })).sort((a, b) => b.r - a.r)[0];
  if (fastest) {
    list.push({
      description: 'fastest sluice algorithm: >= 0.7x ioredis auto-pipelined INCR, 256 in flight, 10,000 keys',
      measured: `${fastest.name} ${times(fastest.r)}`,
      met: fastest.r >= 0.7,
    });
  }
  const single: Scenario = { inFlight: 1, keys: 10_000 };
  const theirs = medianOf(FLEXIBLE_REDIS, single);
  for (const name of sluice) {
    const ours = medianOf(name, single);
    list.push(
      {
        description: `${name}: p50 at 1 in flight <= RateLimiterRedis's`,
        measured: `${ours.p50.toFixed(3)} ms vs ${theirs.p50.toFixed(3)} ms`,
        met: ours.p50 <= theirs.p50,
      },
      {
        description: `${name}: Redis CPU per decision at 1 in flight <= RateLimiterRedis's`,
        measured: `${ours.redisCpuUs.toFixed(1)} µs vs ${theirs.redisCpuUs.toFixed(1)} µs`,
        met: ours.redisCpuUs <= theirs.redisCpuUs,
      },
    );
  }
  const bytes = (name: string) => report.bytesPerClient.find((b) => b.name === name)?.bytes ?? Number.NaN;
  const counter = bytes('plain counter with TTL');
  const memoryTargets: readonly [string, number, string][] = [
    ['sluice fixedWindow', counter, `a plain counter with a TTL (${counter.toFixed(2)} B)`],
    ['sluice gcra', counter, `a plain counter with a TTL (${counter.toFixed(2)} B)`],
    ['sluice tokenBucket', 130, '130 B'],
  ];
  for (const [name, most, what] of memoryTargets) {
    const measured = bytes(name);
    const missing = report.bytesPerClient.every((b) => b.name !== name);
    list.push({
      description: `${name}: used_memory per client <= ${what}`,
      measured: missing ? 'not measured: not on this branch' : `${measured.toFixed(2)} B`,
      met: measured <= most,
    });
  }
  const memoryMedian = (name: string) =>
    median(report.inProcess.find((m) => m.name === name)?.decisionsPerSecond ?? []);
  for (const entry of report.inProcess.filter((m) => m.name !== FLEXIBLE_MEMORY)) {
    const r = memoryMedian(entry.name) / memoryMedian(FLEXIBLE_MEMORY);
    list.push({ description: `${entry.name}: >= 1.5x RateLimiterMemory`, measured: times(r), met: r >= 1.5 });
  }
  const flood = report.flood;
  list.push({
    description: 'denied-key flood: >= 50x fewer Redis calls with deniedCache, identical decisions',
    measured: `${flood.callsWithout} vs ${flood.callsWith} decisions sent to Redis (${times(flood.callsWithout / flood.callsWith)}), decisions ${flood.identical ? 'identical' : 'DIFFERENT'}`,
    met: flood.callsWithout / flood.callsWith >= 50 && flood.identical,
  });
  // The service's target: one instance reaches at least half the library's decisions/s on the same Redis.
  const { serve } = report;
  for (const [transport, sample] of [
    ['gRPC', serve.grpc],
    ['/json', serve.json],
  ] as const) {
    const r = sample.decisionsPerSecond / serve.inProcess.decisionsPerSecond;
    list.push({
      description: `sluice serve, one instance, ${transport}, ${SERVE_IN_FLIGHT} in flight: >= 0.5x the library in process`,
      measured: times(r),
      met: r >= 0.5,
    });
  }
  list.push(...httpTargets(report.http));
  if (!sluice.includes('sluice gcra')) {
    list.push({
      description: 'sluice gcra: >= 2x RateLimiterRedis, 256 in flight, 10,000 keys',
      measured: 'not measured: not on this branch',
      met: false,
    });
  }
  return list;
}

/** `npm run bench [-- --quick] [-- --redis URL]`: measures, prints the targets, writes docs/. */
async function main(argv: readonly string[]): Promise<void> {
  const redisAt = argv.indexOf('--redis');
  const report = await runBenchmarks({
    quick: argv.includes('--quick'),
    redisUrl: redisAt >= 0 ? argv[redisAt + 1] : undefined,
    outputDir: join(import.meta.dirname, '..', 'docs'),
    // One line rewritten in place on a terminal; one line per step in a log.
    onProgress: (line) => process.stderr.write(process.stderr.isTTY ? `\r\x1b[K${line}` : `${line}\n`),
  });
  if (process.stderr.isTTY) process.stderr.write('\r\x1b[K');
  console.log(`Decisions/s, median of ${report.runs} runs, 256 in flight, 10,000 keys (ratios within each run):`);
  for (const result of report.redis) {
    const s = report.scenarios.findIndex((scenario) => sameScenario(scenario, MAIN));
    const perSecond = median((result.samples[s] ?? []).map((x) => x.decisionsPerSecond));
    console.log(
      `  ${result.name.padEnd(42)} ${Math.round(perSecond).toLocaleString('en-US').padStart(9)}/s  ${times(report.ratio(result.name, FLEXIBLE_REDIS, MAIN)).padStart(6)} RateLimiterRedis  ${times(report.ratio(result.name, INCR, MAIN)).padStart(6)} INCR`,
    );
  }
  console.log('\nTargets:');
  for (const target of report.targets)
    console.log(`  ${target.met ? 'met   ' : 'MISSED'} ${target.description}: ${target.measured}`);
  console.log(`\nWritten to docs/benchmarks.md and docs/benchmarks.svg. Reproduce: ${report.command}`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main(process.argv.slice(2)).catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
