import { fork, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { startRedisServer } from '../src/cli/redis-server.js';
import { createLimiter, fixedWindow, redisStore } from '../dist/esm/index.js';
import { combine, keysFor, median, run, type Decide, type Run, type Sample } from './measure.js';
import { FLOOR_KINDS, startFloorServer, type FloorKind, type FloorServer } from './serve-floor.js';
import type { LoadOrder, LoadReply } from './serve-load.js';

/**
 * One `sluice serve` process (the built command) on a private Redis, asked through gRPC and through
 * POST /json with `inFlight` calls at a time, beside the library in this process on the same Redis.
 * The calls to the service come from `loadProcesses` processes of their own (bench/serve-load.ts),
 * each with its own connections, which share the calls in flight: one client in this process could
 * not send them as fast as the service answers. Every key stays under its limit, so each call is a
 * full decision that counts.
 *
 * With `floor`, the same loads also ask, in the same rounds, servers that answer a constant and
 * decide nothing (bench/serve-floor.ts): what a transport alone costs one Node process per call.
 */
export interface ServeBench {
  readonly inProcess: ServeSample;
  readonly grpc: ServeSample;
  readonly json: ServeSample;
  /** With `floor`: each floor server, asked as the service is. */
  readonly floor?: Readonly<Record<FloorKind, ServeSample>>;
  readonly loadProcesses: number;
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
const LIMIT = 1_000_000_000;
const CONFIG = `domain: bench\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: ${LIMIT} }\n`;

/** The `i`-th of `parts` near-equal shares of `total`. */
function share(total: number, parts: number, i: number): number {
  return Math.floor(total / parts) + (i < total % parts ? 1 : 0);
}

// Linux counts a process's CPU time in clock ticks of 1/100 s (USER_HZ).
const TICKS_PER_SECOND = 100;

/**
 * The CPU time a process has used so far, in microseconds, from /proc; NaN elsewhere. With
 * `mainThread`, its main thread's alone (Linux gives it the process's id).
 */
async function processCpuMicros(pid: number | undefined, mainThread = false): Promise<number> {
  try {
    const stat = await readFile(mainThread ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, 'utf8');
    // After the command's name (in parentheses, and it may hold spaces): utime and stime are the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / TICKS_PER_SECOND;
  } catch {
    return NaN;
  }
}

/** The CPU time Redis has used so far, in microseconds, from INFO. */
async function redisCpuMicros(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const seconds = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return (seconds('used_cpu_sys') + seconds('used_cpu_user')) * 1e6;
}

interface Load {
  order(order: LoadOrder): Promise<LoadReply>;
  stop(): void;
}

const LATE_MS = 30_000;

/** `count` load-generating processes, each ready for orders. */
function startLoads(count: number): Promise<Load[]> {
  const script = new URL('./serve-load.ts', import.meta.url);
  return Promise.all(
    Array.from({ length: count }, async (): Promise<Load> => {
      const child = fork(script, [], { execArgv: ['--import', 'tsx'], serialization: 'advanced' });
      await once(child, 'spawn');
      return {
        order: (order) =>
          new Promise((resolve, reject) => {
            // A call the service never answers would hold the run for ever: fail the bench instead.
            const late = setTimeout(
              () => reject(new Error(`load process: no answer ${LATE_MS} ms after its run should have ended`)),
              order.durationMs + LATE_MS,
            );
            child.once('message', (reply: LoadReply) => {
              clearTimeout(late);
              if (reply.error === undefined) resolve(reply);
              else reject(new Error(`load process: ${reply.error}`));
            });
            child.send(order);
          }),
        stop: () => child.disconnect(),
      };
    }),
  );
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

/** A server the loads ask on one transport: its process, whose CPU time is counted, and its port. */
interface Asked {
  readonly pid: number | undefined;
  readonly transport: LoadOrder['transport'];
  readonly port: number;
}

/**
 * `redisUrl`: the Redis to count in (the service uses its own prefix); without it, a private
 * redis-server. `floor`: measure the floor servers too.
 */
export async function benchServe(options: {
  inFlight: number;
  keys: number;
  durationMs: number;
  runs: number;
  loadProcesses: number;
  redisUrl?: string;
  floor?: boolean;
}): Promise<ServeBench> {
  const own = options.redisUrl === undefined ? await startRedisServer() : undefined;
  const url = options.redisUrl ?? (own as { url: string }).url;
  const dir = await mkdtemp(join(tmpdir(), 'sluice-bench-serve-'));
  await writeFile(join(dir, 'bench.yaml'), CONFIG);
  const service = spawn(
    process.execPath,
    [
      'dist/esm/cli/main.js',
      'serve',
      '--config',
      dir,
      '--redis',
      url,
      '--prefix',
      'bench-serve',
      '--grpc-port',
      '0',
      '--http-port',
      '0',
      '--host',
      '127.0.0.1',
      '--timeout',
      '10s',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const redis = new Redis(url);
  const loads = await startLoads(options.loadProcesses);
  const floors: FloorServer[] = [];
  try {
    const ports = await new Promise<{ grpc: number; http: number }>((resolve, reject) => {
      let text = '';
      service.stderr.on('data', (chunk: Buffer) => {
        text += chunk.toString();
        const bound = /gRPC on 127\.0\.0\.1:(\d+), HTTP on 127\.0\.0\.1:(\d+)/.exec(text);
        if (bound) resolve({ grpc: Number(bound[1]), http: Number(bound[2]) });
      });
      service.once('exit', (code) => reject(new Error(`sluice serve exited with ${code}: ${text}`)));
    });
    const limiter = createLimiter({
      store: redisStore(redis),
      policy: fixedWindow({ limit: LIMIT, window: '1h' }),
      prefix: 'bench-inprocess',
    });
    const keys = keysFor(options.keys);
    if (options.floor)
      floors.push(...(await Promise.all(Object.keys(FLOOR_KINDS).map((kind) => startFloorServer(kind as FloorKind)))));

    /**
     * Runs `calls` (which answers with its runs and their callers' CPU time) and reads the CPU time
     * of the server process `pid` (none in process) and of Redis around it.
     */
    async function sample(
      pid: number | undefined,
      calls: () => Promise<{ runs: Run[]; callersMicros: number }>,
    ): Promise<ServeSample> {
      const cpu = async () => ({
        service: await processCpuMicros(pid),
        serviceMainThread: await processCpuMicros(pid, true),
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
    const through = ({ pid, transport, port }: Asked, durationMs: number) =>
      sample(pid, async () => {
        const replies = await Promise.all(
          loads.map((load, i) =>
            load.order({
              transport,
              port,
              // Each process takes every n-th key, so that all the keys see the same load.
              keys: keys.filter((_, k) => k % loads.length === i),
              inFlight: share(options.inFlight, loads.length, i),
              durationMs,
            }),
          ),
        );
        return {
          runs: replies.map((reply) => reply.run as Run),
          callersMicros: replies.reduce((sum, reply) => sum + (reply.cpuMicros ?? NaN), 0),
        };
      });

    const asked = new Map<'grpc' | 'json' | FloorKind, Asked>([
      ['grpc', { pid: service.pid, transport: 'grpc', port: ports.grpc }],
      ['json', { pid: service.pid, transport: 'json', port: ports.http }],
      ...floors.map(
        ({ kind, pid, port }) => [kind, { pid, transport: kind === 'http' ? 'json' : 'grpc', port }] as const,
      ),
    ]);
    const inProcessSamples: ServeSample[] = [];
    const samples = new Map([...asked.keys()].map((path) => [path, [] as ServeSample[]]));
    // A short warm-up of each path (connections, script cache, JIT), then alternating timed runs.
    const warmUpMs = Math.min(500, options.durationMs);
    await inProcess(warmUpMs);
    for (const server of asked.values()) await through(server, warmUpMs);
    for (let i = 0; i < options.runs; i++) {
      inProcessSamples.push(await inProcess(options.durationMs));
      for (const [path, server] of asked) samples.get(path)?.push(await through(server, options.durationMs));
    }
    const of = (path: 'grpc' | 'json' | FloorKind) => best(samples.get(path) ?? []);
    return {
      inProcess: best(inProcessSamples),
      grpc: of('grpc'),
      json: of('json'),
      ...(options.floor && { floor: { 'grpc-js': of('grpc-js'), http2: of('http2'), http: of('http') } }),
      loadProcesses: loads.length,
    };
  } finally {
    await Promise.all(floors.map((floor) => floor.stop()));
    for (const load of loads) load.stop();
    service.kill('SIGTERM');
    if (service.exitCode === null) await once(service, 'exit');
    redis.disconnect();
    await own?.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const flag = (name: string): number | undefined => {
    const at = process.argv.indexOf(name);
    return at < 0 ? undefined : Number(process.argv[at + 1]);
  };
  const quick = process.argv.includes('--quick');
  const result = await benchServe({
    inFlight: SERVE_IN_FLIGHT,
    keys: 1000,
    durationMs: (flag('--seconds') ?? (quick ? 0.3 : 3)) * 1000,
    runs: flag('--runs') ?? (quick ? 1 : 5),
    loadProcesses: flag('--load-processes') ?? SERVE_LOAD_PROCESSES,
    floor: process.argv.includes('--floor'),
  });
  const library = result.inProcess.decisionsPerSecond;
  const micros = (n: number) => (Number.isNaN(n) ? 'n/a' : n.toFixed(0).padStart(4));
  const line = (name: string, s: ServeSample) =>
    `${name.padEnd(31)} ${Math.round(s.decisionsPerSecond).toString().padStart(7)}/s ` +
    `${((100 * s.decisionsPerSecond) / library).toFixed(0).padStart(3)}% of in-process  ` +
    `p50 ${s.p50Ms.toFixed(2).padStart(6)} ms  p99 ${s.p99Ms.toFixed(2).padStart(6)} ms  ` +
    `CPU µs/call: callers ${micros(s.cpuMicros.callers)}, server ${micros(s.cpuMicros.service)} ` +
    `(main thread ${micros(s.cpuMicros.serviceMainThread)}), Redis ${micros(s.cpuMicros.redis)}`;
  console.log(`${SERVE_IN_FLIGHT} in flight; each server asked by ${result.loadProcesses} load processes`);
  const served: [string, ServeSample][] = [
    ['sluice serve, gRPC', result.grpc],
    ['sluice serve, /json', result.json],
  ];
  console.log(line('in-process library', result.inProcess));
  for (const [name, s] of served) console.log(line(name, s));
  if (result.floor) {
    console.log('\nTransport floor: a constant answer, no decision (bench/serve-floor.ts), the same loads');
    for (const kind of Object.keys(FLOOR_KINDS) as FloorKind[]) {
      const s = result.floor[kind];
      console.log(line(FLOOR_KINDS[kind], s));
      served.push([FLOOR_KINDS[kind], s]);
    }
    // One Node process runs its JavaScript on one thread, so one core bounds it: 1,000,000 µs of CPU
    // a second. Where its other threads (the garbage collector's helpers) get a second core, its
    // main thread's CPU alone bounds it.
    const half = library / 2;
    console.log(
      `\nThe most one Node process serves, 1,000,000 / server CPU µs per call (the process; its main thread alone), ` +
        `against half the library, ${Math.round(half)}/s, which allows a server at most ${(1e6 / half).toFixed(0)} µs per call:`,
    );
    const most = (micros: number) => {
      const perSecond = 1e6 / micros;
      return `${Math.round(perSecond).toString().padStart(7)}/s ${(perSecond / library).toFixed(2)}x`;
    };
    for (const [name, s] of served) {
      const { service, serviceMainThread } = s.cpuMicros;
      const verdict =
        1e6 / service >= half
          ? 'reachable'
          : 1e6 / serviceMainThread >= half
            ? 'reachable only with its other threads on another core'
            : 'out of reach';
      console.log(`${name.padEnd(31)} ${most(service)}; ${most(serviceMainThread)}: 0.5x ${verdict}`);
    }
  }
}
