import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { startRedisServer } from '../src/cli/redis-server.js';
import { createLimiter, fixedWindow, redisStore } from '../dist/esm/index.js';
import { combine, keysFor, median, run, type Decide, type Run, type Sample } from './measure.js';
import { FLOOR_KINDS, startFloorServer, type FloorKind, type FloorServer } from './serve-floor.js';
import type { LoadOrder } from './serve-load.js';
import { processCpuMicros, redisCpuMicros, startLoads, startService, type ServiceProcess } from './serve-processes.js';

/**
 * One `sluice serve` process (the built command) on a private Redis, asked through gRPC and through
 * POST /json with `inFlight` calls at a time, beside the library in this process on the same Redis.
 * The calls to the service come from `loadProcesses` processes of their own (bench/serve-load.ts),
 * each with its own connections, which share the calls in flight: one client in this process could
 * not send them as fast as the service answers. Every key stays under its limit, so each call is a
 * full decision that counts.
 *
 * With `cost`, the same rounds also measure what a call costs against a Go service: a second
 * `sluice serve` on its memory store (no Redis client on its path) over gRPC, beside a grpc-go
 * server and a bare node:http2 one answering a constant (bench/serve-floor.ts); and Redis's side,
 * envoyproxy/ratelimit's commands for the same requests at the service's rate (bench/redis-pattern.ts).
 * With `floor`, the other floor servers too (bare @grpc/grpc-js, bare node:http).
 */
export interface ServeBench {
  readonly inProcess: ServeSample;
  readonly grpc: ServeSample;
  /** `sluice serve --workers 2` on the same Redis, over gRPC: its server CPU is the primary's and both workers'. */
  readonly twoWorkers: ServeSample;
  /** Its decisions/s over one process's, per round. */
  readonly twoWorkersToOne: readonly number[];
  readonly json: ServeSample;
  /** The floor servers measured (the Go one is missing where there is no `go`). */
  readonly floor: Partial<Record<FloorKind, ServeSample>>;
  readonly cost?: CostBench;
  readonly loadProcesses: number;
}

/** What a call costs, each ratio taken within a round (the machine's load moves all of a round alike). */
export interface CostBench {
  /** `sluice serve` on its memory store, over gRPC. */
  readonly memory: ServeSample;
  /** Its server CPU per call over the grpc-go floor's, per round; empty without `go`. */
  readonly toGo: readonly number[];
  /** Its server CPU per call over the bare node:http2 floor's, per round. */
  readonly toHttp2: readonly number[];
  /** envoyproxy/ratelimit's Redis commands, at the decisions/s of `sluice serve` on Redis in the same round. */
  readonly pattern: ServeSample;
  /** Redis CPU per decision of `sluice serve` on Redis over the pattern's per request, per round. */
  readonly redisToPattern: readonly number[];
}

export interface ServeSample extends Sample {
  /**
   * CPU time per decision, in microseconds, of: the processes asking (this one for the library,
   * which decides in it; the load processes for a server), the server asked (the service, or a
   * floor server), that server's main thread alone, and Redis. NaN where it could not be read (a
   * server's CPU is read from /proc, on Linux only).
   */
  readonly cpuMicros: {
    readonly callers: number;
    readonly service: number;
    /**
     * The thread that runs the server's JavaScript, which one core bounds; its other threads
     * (the garbage collector's helpers, libuv's) can run beside it on another.
     */
    readonly serviceMainThread: number;
    readonly redis: number;
  };
}

/** Calls in flight at once, as the target states it. */
export const SERVE_IN_FLIGHT = 64;
/** Load-generating processes asking the service. */
export const SERVE_LOAD_PROCESSES = 2;
/** envoyproxy/ratelimit's REDIS_POOL_SIZE default: the replayed pattern's connections. */
const PATTERN_CONNECTIONS = 10;
const LIMIT = 1_000_000_000;
const CONFIG = `domain: bench\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: ${LIMIT} }\n`;

/** The `i`-th of `parts` near-equal shares of `total`. */
function share(total: number, parts: number, i: number): number {
  return Math.floor(total / parts) + (i < total % parts ? 1 : 0);
}

function best(samples: readonly ServeSample[]): ServeSample {
  const middle = (pick: (s: ServeSample) => number) => median(samples.map(pick));
  return {
    decisionsPerSecond: middle((s) => s.decisionsPerSecond),
    p50Ms: middle((s) => s.p50Ms),
    p99Ms: middle((s) => s.p99Ms),
    cpuMicros: {
      callers: middle((s) => s.cpuMicros.callers),
      service: middle((s) => s.cpuMicros.service),
      serviceMainThread: middle((s) => s.cpuMicros.serviceMainThread),
      redis: middle((s) => s.cpuMicros.redis),
    },
  };
}

/** A server the loads ask on one transport: its process, whose CPU time is counted (with its children's for workers), and its port. */
interface Asked {
  readonly pid: number | undefined;
  readonly workers?: boolean;
  readonly transport: LoadOrder['transport'];
  readonly port: number;
}

type Path = 'grpc' | 'grpc2' | 'json' | 'memory' | FloorKind;

/**
 * `redisUrl`: the Redis to count in (the service uses its own prefix); without it, a private
 * redis-server. `floor`: every floor server; `cost`: the cost comparisons (see ServeBench). `log`
 * is told what was skipped.
 */
export async function benchServe(options: {
  inFlight: number;
  keys: number;
  durationMs: number;
  runs: number;
  loadProcesses: number;
  redisUrl?: string;
  floor?: boolean;
  cost?: boolean;
  log?: (line: string) => void;
}): Promise<ServeBench> {
  const own = options.redisUrl === undefined ? await startRedisServer() : undefined;
  const url = options.redisUrl ?? (own as { url: string }).url;
  const redisPort = Number(new URL(url).port || 6379);
  const dir = await mkdtemp(join(tmpdir(), 'sluice-bench-serve-'));
  await writeFile(join(dir, 'bench.yaml'), CONFIG);
  const redis = new Redis(url);
  const services: ServiceProcess[] = [];
  const floors: FloorServer[] = [];
  const loads = await startLoads(options.loadProcesses);
  try {
    const service = await startService(dir, ['--redis', url, '--prefix', 'bench-serve', '--timeout', '10s']);
    services.push(service);
    const two = await startService(dir, [
      '--redis',
      url,
      '--prefix',
      'bench-serve-2',
      '--timeout',
      '10s',
      '--workers',
      '2',
    ]);
    services.push(two);
    const memory = options.cost ? await startService(dir, []) : undefined;
    if (memory) services.push(memory);
    const limiter = createLimiter({
      store: redisStore(redis),
      policy: fixedWindow({ limit: LIMIT, window: '1h' }),
      prefix: 'bench-inprocess',
    });
    const keys = keysFor(options.keys);
    const kinds = (Object.keys(FLOOR_KINDS) as FloorKind[]).filter(
      (kind) => options.floor || (options.cost && (kind === 'go' || kind === 'http2')),
    );
    for (const kind of kinds) {
      const floor = await startFloorServer(kind);
      if (floor) floors.push(floor);
      else
        options.log?.(
          `no \`go\` on PATH: the ${FLOOR_KINDS[kind]} row is skipped (Debian: golang-go, golang-google-grpc-dev)`,
        );
    }

    /**
     * Runs `calls` (which answers with its runs and their callers' CPU time) and reads the CPU time
     * of the server process `pid` (none in process) and of Redis around it.
     */
    async function sample(
      pid: number | undefined,
      calls: () => Promise<{ runs: Run[]; callersMicros: number }>,
      workers = false,
    ): Promise<ServeSample> {
      const cpu = async () => ({
        service: await processCpuMicros(pid, false, workers),
        serviceMainThread: await processCpuMicros(pid, true, workers),
        redis: await redisCpuMicros(redis),
      });
      const before = await cpu();
      const { runs, callersMicros } = await calls();
      const after = await cpu();
      const decisions = runs.reduce((sum, r) => sum + r.done, 0);
      return {
        ...combine(runs),
        cpuMicros: {
          callers: callersMicros / decisions,
          service: (after.service - before.service) / decisions,
          serviceMainThread: (after.serviceMainThread - before.serviceMainThread) / decisions,
          redis: (after.redis - before.redis) / decisions,
        },
      };
    }
    const inProcess = (durationMs: number) =>
      sample(undefined, async () => {
        const before = process.cpuUsage();
        const decide: Decide = (key) => limiter.limit(key);
        const runs = [await run(decide, keys, options.inFlight, durationMs)];
        const used = process.cpuUsage(before);
        return { runs, callersMicros: used.user + used.system };
      });
    /** The loads ask `asked`, `inFlight` at a time, or `perSecond` (an open loop). */
    const through = ({ pid, workers, transport, port }: Asked, durationMs: number, perSecond?: number) =>
      sample(
        pid,
        async () => {
          const replies = await Promise.all(
            loads.map((load, i) =>
              load.order({
                transport,
                port,
                // Each process takes every n-th key, so that all the keys see the same load.
                keys: keys.filter((_, k) => k % loads.length === i),
                inFlight:
                  transport === 'redis-pattern'
                    ? share(PATTERN_CONNECTIONS, loads.length, i)
                    : share(options.inFlight, loads.length, i),
                durationMs,
                ...(perSecond === undefined ? {} : { perSecond: perSecond / loads.length }),
              }),
            ),
          );
          return {
            runs: replies.map((reply) => reply.run as Run),
            callersMicros: replies.reduce((sum, reply) => sum + (reply.cpuMicros ?? NaN), 0),
          };
        },
        workers,
      );

    const asked = new Map<Path, Asked>([
      ['grpc', { pid: service.child.pid, transport: 'grpc', port: service.grpcPort }],
      ['grpc2', { pid: two.child.pid, workers: true, transport: 'grpc', port: two.grpcPort }],
      ['json', { pid: service.child.pid, transport: 'json', port: service.httpPort }],
      ...(memory ? [['memory', { pid: memory.child.pid, transport: 'grpc', port: memory.grpcPort }] as const] : []),
      ...floors.map(
        ({ kind, pid, port }) => [kind, { pid, transport: kind === 'http' ? 'json' : 'grpc', port }] as const,
      ),
    ]);
    const pattern: Asked = { pid: undefined, transport: 'redis-pattern', port: redisPort };
    const inProcessSamples: ServeSample[] = [];
    const samples = new Map([...asked.keys()].map((path) => [path, [] as ServeSample[]]));
    const patternSamples: ServeSample[] = [];
    // A short warm-up of each path (connections, script cache, JIT), then alternating timed runs.
    const warmUpMs = Math.min(500, options.durationMs);
    await inProcess(warmUpMs);
    for (const server of asked.values()) await through(server, warmUpMs);
    if (options.cost) await through(pattern, warmUpMs, 1000);
    const paths = [...asked];
    for (let i = 0; i < options.runs; i++) {
      inProcessSamples.push(await inProcess(options.durationMs));
      // Every other round in reverse: a load that drifts through a round weighs on both sides of a ratio alike.
      for (const [path, server] of i % 2 === 0 ? paths : [...paths].reverse())
        samples.get(path)?.push(await through(server, options.durationMs));
      // At the rate the service on Redis answered in this round.
      const rate = samples.get('grpc')?.at(-1)?.decisionsPerSecond ?? 0;
      if (options.cost) patternSamples.push(await through(pattern, options.durationMs, rate));
    }
    const of = (path: Path) => best(samples.get(path) ?? []);
    const floor = Object.fromEntries(floors.map(({ kind }) => [kind, of(kind)]));
    /** Per round, `pick` of one path's sample over another's. */
    const ratios = (over: ServeSample[], under: ServeSample[], pick: (s: ServeSample) => number) =>
      under.length === 0
        ? []
        : over.map((s, i) => pick(s) / pick(under[i] as ServeSample)).filter((r) => !Number.isNaN(r));
    const serverCpu = (s: ServeSample) => s.cpuMicros.service;
    const memorySamples = samples.get('memory') ?? [];
    return {
      inProcess: best(inProcessSamples),
      grpc: of('grpc'),
      twoWorkers: of('grpc2'),
      twoWorkersToOne: ratios(samples.get('grpc2') ?? [], samples.get('grpc') ?? [], (s) => s.decisionsPerSecond),
      json: of('json'),
      floor,
      ...(options.cost && {
        cost: {
          memory: of('memory'),
          toGo: ratios(memorySamples, samples.get('go') ?? [], serverCpu),
          toHttp2: ratios(memorySamples, samples.get('http2') ?? [], serverCpu),
          pattern: best(patternSamples),
          redisToPattern: ratios(samples.get('grpc') ?? [], patternSamples, (s) => s.cpuMicros.redis),
        },
      }),
      loadProcesses: loads.length,
    };
  } finally {
    await Promise.all(floors.map((floor) => floor.stop()));
    for (const load of loads) load.stop();
    await Promise.all(services.map((service) => service.stop()));
    redis.disconnect();
    await own?.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { printServeBench } = await import('./serve-print.js');
  const flag = (name: string): number | undefined => {
    const at = process.argv.indexOf(name);
    return at < 0 ? undefined : Number(process.argv[at + 1]);
  };
  const quick = process.argv.includes('--quick');
  const result = await benchServe({
    inFlight: SERVE_IN_FLIGHT,
    keys: 1000,
    durationMs: (flag('--seconds') ?? (quick ? 0.3 : 3)) * 1000,
    runs: flag('--runs') ?? (quick ? 1 : 7),
    loadProcesses: flag('--load-processes') ?? SERVE_LOAD_PROCESSES,
    floor: process.argv.includes('--floor'),
    cost: true,
    log: (line) => console.log(line),
  });
  printServeBench(result, SERVE_IN_FLIGHT, process.argv.includes('--floor'));
}
