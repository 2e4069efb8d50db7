/**
 * The HTTP bench: autocannon against Express, Fastify and node:http, each with no limiter (the
 * ceiling), sluice's middleware and the peers', on Redis and in memory. Every server runs in a
 * process of its own (bench/http-server.ts); the load comes from this process.
 *
 *     npm run build && npx tsx bench/http.ts [--quick]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import { startRedisServer } from '../src/cli/redis-server.js';
import {
  FRAMEWORKS,
  limiterName,
  peersOf,
  serverName,
  serversOf,
  type Framework,
  type ServerConfig,
  type StoreKind,
} from './http-contenders.js';
import { median } from './measure.js';
import type { Target } from './run.js';

export interface HttpOptions {
  /** A few hundred requests per server, 10 connections, one round: checks that it all works, measures nothing. */
  quick?: boolean;
  /** Rounds; the report gives medians over them. Default 5 (quick: 1). */
  rounds?: number;
  /** Seconds of load per measurement. Default 3. */
  seconds?: number;
  onProgress?: (line: string) => void;
}

/** What one server did in one round. */
export interface HttpSample {
  readonly requestsPerSecond: number;
  /** Its requests/s over its framework's no-limiter server's in the same round. */
  readonly ceilingRatio: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /**
   * The server process's CPU time (user and system) over the measurement, per response: its cost
   * per request, which the load of other processes on the machine disturbs far less than its
   * requests per second (their contention still adds some: cache misses, migrations).
   */
  readonly cpuMicrosPerRequest: number;
  /** Keys in the private Redis after the measurement (the Redis store only): one or more per client when keyed by X-Forwarded-For. */
  readonly keysInRedis?: number;
}

export interface HttpServerResult {
  readonly config: ServerConfig;
  readonly name: string;
  /** The rate-limit fields of its answer to one request before the rounds (none without a limiter): shows the limiter runs. */
  readonly rateLimitHeaders: readonly string[];
  /** One per round. */
  readonly samples: readonly HttpSample[];
}

export interface HttpReport {
  readonly quick: boolean;
  readonly rounds: number;
  readonly connections: number;
  /** Distinct client addresses, sent in turn as X-Forwarded-For. */
  readonly clients: number;
  /** e.g. '3 s after a 1 s warm-up'. */
  readonly load: string;
  readonly servers: readonly HttpServerResult[];
}

const SERVER_SCRIPT = join(import.meta.dirname, 'http-server.ts');
const ROOT = join(import.meta.dirname, '..');
const CLIENTS = 10_000;
const CONNECTIONS = 100;

/** 10,000 addresses in 198.18.0.0/15, the range set aside for benchmarks (RFC 2544). */
export const CLIENT_ADDRESSES: readonly string[] = Array.from(
  { length: CLIENTS },
  (_, i) => `198.18.${i >> 8}.${i & 255}`,
);

interface RunningServer {
  readonly config: ServerConfig;
  readonly port: number;
  readonly child: ChildProcess;
}

/** Starts one server process and resolves once it listens. */
function startServer(config: ServerConfig): Promise<RunningServer> {
  const child = spawn(process.execPath, ['--import', 'tsx', SERVER_SCRIPT, JSON.stringify(config)], {
    cwd: ROOT,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`${serverName(config)} did not start within 120 s`)), 120_000);
    function fail(error: Error) {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(error);
    }
    child.once('error', fail);
    child.once('exit', (code) => fail(new Error(`${serverName(config)} exited with code ${code} before listening`)));
    child.once('message', (message: { port: number }) => {
      clearTimeout(timer);
      child.removeAllListeners('exit');
      resolve({ config, port: message.port, child });
    });
  });
}

/** The server process's CPU time so far, in µs (user and system), as it reports it over IPC. */
function cpuMicros({ child }: RunningServer): Promise<number> {
  return new Promise((resolve) => {
    const onMessage = (message: { cpuMicros?: number }) => {
      if (message.cpuMicros === undefined) return;
      child.off('message', onMessage);
      resolve(message.cpuMicros);
    };
    child.on('message', onMessage);
    child.send('cpu');
  });
}

/** Closes the IPC channel, on which the server exits; kills it if it has not within 5 s. */
async function stopServer({ child }: RunningServer): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  if (child.connected) child.disconnect();
  else child.kill('SIGTERM');
  await exited;
  clearTimeout(timer);
}

type Load = { readonly seconds: number } | { readonly amount: number };

/** One autocannon run; every request from the next client address. Throws unless every response was a 2xx. */
async function hammer(
  server: RunningServer,
  connections: number,
  load: Load,
): Promise<Omit<HttpSample, 'ceilingRatio' | 'keysInRedis'>> {
  const cpuBefore = await cpuMicros(server);
  let next = 0;
  const result = await autocannon({
    url: `http://127.0.0.1:${server.port}/`,
    connections,
    ...('amount' in load ? { amount: load.amount } : { duration: load.seconds }),
    // A run ends at a sample: sampling often ends it close to its duration (or its amount).
    sampleInt: 100,
    requests: [
      {
        setupRequest(request) {
          request.headers['x-forwarded-for'] = CLIENT_ADDRESSES[next++ % CLIENTS] as string;
          return request;
        },
      },
    ],
  });
  if (result.errors > 0 || result.timeouts > 0 || result.non2xx > 0 || result.requests.total === 0) {
    throw new Error(
      `${serverName(server.config)}: ${result.requests.total} responses, ${result.non2xx} not 2xx, ${result.errors} errors, ${result.timeouts} timeouts`,
    );
  }
  const cpuAfter = await cpuMicros(server);
  return {
    requestsPerSecond: result.requests.total / Math.max(result.duration, 0.01),
    cpuMicrosPerRequest: (cpuAfter - cpuBefore) / result.requests.total,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
  };
}

/** The names of the rate-limit fields in a server's answer to one request (from an address the rounds never send). */
async function rateLimitHeaders(server: RunningServer): Promise<string[]> {
  const response = await fetch(`http://127.0.0.1:${server.port}/`, {
    headers: { 'x-forwarded-for': '198.18.255.255' },
  });
  await response.arrayBuffer();
  if (!response.ok) throw new Error(`${serverName(server.config)} answered ${response.status}`);
  return [...response.headers.keys()].filter((name) => /^(x-)?ratelimit/.test(name)).sort();
}

/** `list` started at `by` (mod its length): each round another server goes first. */
function rotated<T>(list: readonly T[], by: number): T[] {
  const start = by % list.length;
  return [...list.slice(start), ...list.slice(0, start)];
}

/** Runs the HTTP bench against a private redis-server of its own. */
export async function runHttpBenchmarks(options: HttpOptions = {}): Promise<HttpReport> {
  const quick = options.quick ?? false;
  const rounds = options.rounds ?? (quick ? 1 : 5);
  const seconds = options.seconds ?? 3;
  const connections = quick ? 10 : CONNECTIONS;
  const warmUp: Load = quick ? { amount: 50 } : { seconds: 1 };
  const measured: Load = quick ? { amount: 200 } : { seconds };
  const progress = options.onProgress ?? (() => undefined);
  const redisServer = await startRedisServer();
  const redis = new Redis(redisServer.url);
  const running: RunningServer[] = [];
  try {
    const configs = FRAMEWORKS.flatMap(serversOf).map((config) =>
      config.store === 'redis' ? { ...config, redisUrl: redisServer.url } : config,
    );
    progress(`starting ${configs.length} HTTP servers`);
    const started = await Promise.allSettled(configs.map(startServer));
    for (const outcome of started) if (outcome.status === 'fulfilled') running.push(outcome.value);
    const failed = started.find((outcome) => outcome.status === 'rejected');
    if (failed) throw failed.reason;
    const headers = new Map<RunningServer, string[]>();
    for (const server of running) headers.set(server, await rateLimitHeaders(server));
    const samples = new Map<RunningServer, Omit<HttpSample, 'ceilingRatio'>[]>(running.map((server) => [server, []]));
    let step = 0;
    for (let round = 0; round < rounds; round++) {
      for (const framework of FRAMEWORKS) {
        for (const server of rotated(
          running.filter((s) => s.config.framework === framework),
          round,
        )) {
          progress(`[${++step}/${rounds * running.length}] HTTP round ${round + 1}: ${serverName(server.config)}`);
          // Each server meets an empty Redis (FLUSHALL keeps the scripts), is warmed up (JIT, connections, keys), then measured.
          await redis.flushall();
          await hammer(server, connections, warmUp);
          const sample = await hammer(server, connections, measured);
          const keysInRedis = server.config.store === 'redis' ? await redis.dbsize() : undefined;
          samples.get(server)?.push({ ...sample, keysInRedis });
        }
      }
    }
    const servers = running.map((server): HttpServerResult => {
      const ceiling = running.find(
        (s) => s.config.framework === server.config.framework && s.config.limiter === undefined,
      ) as RunningServer;
      const theirs = samples.get(ceiling) ?? [];
      return {
        config: server.config,
        name: serverName(server.config),
        rateLimitHeaders: headers.get(server) ?? [],
        samples: (samples.get(server) ?? []).map((sample, round) => ({
          ...sample,
          ceilingRatio: sample.requestsPerSecond / (theirs[round]?.requestsPerSecond ?? Number.NaN),
        })),
      };
    });
    const load =
      'amount' in measured
        ? `${measured.amount} requests after ${'amount' in warmUp ? warmUp.amount : 0} to warm up`
        : `${measured.seconds} s after a ${'seconds' in warmUp ? warmUp.seconds : 0} s warm-up`;
    return { quick, rounds, connections, clients: CLIENTS, load, servers };
  } finally {
    await Promise.all(running.map(stopServer));
    redis.disconnect();
    await redisServer.stop();
  }
}

/** The median over rounds of a server's ratio to its framework's ceiling. */
export function ceilingRatio(result: HttpServerResult): number {
  return median(result.samples.map((s) => s.ceilingRatio));
}

/** The median over rounds of `a`'s requests/s over `b`'s (measured in the same rounds). */
export function pairRatio(a: HttpServerResult, b: HttpServerResult): number {
  return median(a.samples.map((s, round) => s.requestsPerSecond / (b.samples[round]?.requestsPerSecond ?? Number.NaN)));
}

/** The server of this framework with this limiter on this store (without autopipelining unless asked). */
export function findServer(
  report: HttpReport,
  framework: Framework,
  limiter: ServerConfig['limiter'],
  store?: StoreKind,
  autoPipelining = false,
): HttpServerResult | undefined {
  return report.servers.find(
    (s) =>
      s.config.framework === framework &&
      s.config.limiter === limiter &&
      s.config.store === store &&
      (s.config.autoPipelining ?? false) === autoPipelining,
  );
}

const STORE_NAMES: Record<StoreKind, string> = { redis: 'Redis', memory: 'memory' };

/** The issue's HTTP target, one line per framework and store: sluice's middleware ahead of every peer at the ceiling ratio. */
export function httpTargets(report: HttpReport): Target[] {
  return FRAMEWORKS.flatMap((framework) =>
    (['redis', 'memory'] as const).map((store): Target => {
      const ours = findServer(report, framework, 'sluice', store);
      const peers = peersOf(framework).map((limiter) => findServer(report, framework, limiter, store));
      const ratio = (result: HttpServerResult | undefined) => (result ? ceilingRatio(result) : Number.NaN);
      const peerNames = peers.map((peer) => (peer ? limiterName(peer.config) : 'missing')).join(' and ');
      return {
        description: `HTTP, ${framework}, ${STORE_NAMES[store]}: sluice's middleware ahead of ${peerNames} at the ceiling ratio`,
        measured: `${ratio(ours).toFixed(2)}x vs ${peers.map((peer) => `${ratio(peer).toFixed(2)}x`).join(', ')}`,
        met: peers.every((peer) => ratio(ours) > ratio(peer)),
      };
    }),
  );
}

/** `npx tsx bench/http.ts [--quick] [--rounds N] [--seconds S]`: measures and prints; writes nothing. */
async function main(argv: readonly string[]): Promise<void> {
  const numberAfter = (flag: string) => (argv.includes(flag) ? Number(argv[argv.indexOf(flag) + 1]) : undefined);
  const report = await runHttpBenchmarks({
    quick: argv.includes('--quick'),
    rounds: numberAfter('--rounds'),
    seconds: numberAfter('--seconds'),
    onProgress: (line) => process.stderr.write(`${line}\n`),
  });
  console.log(
    `${report.connections} connections, ${report.clients} client addresses, ${report.load}, median of ${report.rounds} round(s):`,
  );
  for (const server of report.servers) {
    const at = (pick: (s: HttpSample) => number) => median(server.samples.map(pick));
    console.log(
      `  ${server.name.padEnd(62)} ${ceilingRatio(server).toFixed(2)}x ceiling  ${Math.round(
        at((s) => s.requestsPerSecond),
      )
        .toLocaleString('en-US')
        .padStart(7)} req/s  ${at((s) => s.cpuMicrosPerRequest)
        .toFixed(1)
        .padStart(
          5,
        )} µs CPU/req  p50 ${at((s) => s.p50Ms)} ms  p99 ${at((s) => s.p99Ms)} ms${server.config.store === 'redis' ? `  ${at((s) => s.keysInRedis ?? 0)} keys in Redis` : ''}`,
    );
  }
  for (const framework of FRAMEWORKS) {
    const on = findServer(report, framework, 'sluice', 'redis', true);
    const off = findServer(report, framework, 'sluice', 'redis');
    if (on && off) console.log(`${framework}: sluice with autopipelining / without: ${pairRatio(on, off).toFixed(2)}x`);
  }
  console.log('\nTargets:');
  for (const target of httpTargets(report))
    console.log(`  ${target.met ? 'met   ' : 'MISSED'} ${target.description}: ${target.measured}`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main(process.argv.slice(2)).catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
