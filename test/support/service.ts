import assert from 'node:assert/strict';
import { spawn, type ChildProcess, type ChildProcessByStdio } from 'node:child_process';
import { once } from 'node:events';
import { after, afterEach, before } from 'node:test';
import type { Readable } from 'node:stream';
import { Redis } from 'ioredis';
import { startRedisServer, type RedisServer } from '../../src/cli/redis-server.js';
import { rlsClient, type RlsClient } from './rls.js';

// The built command, as users run it (`npm run build` first; npm test builds when stale).
const CLI = 'dist/esm/cli/main.js';

/**
 * Flags for a service whose calls a test counts exactly: on a busy test machine a call can wait for
 * Redis past the default 1 s, and one answered by the failure policy instead is not counted.
 */
export const PATIENT = ['--timeout', '60s'];

/** A running `sluice serve` process, and clients of both its ports. */
export interface Service {
  readonly child: ChildProcess;
  readonly grpcPort: number;
  readonly httpPort: number;
  /** Its stderr so far, one line each (the lines still come while it runs). */
  readonly stderr: readonly string[];
  readonly exited: Promise<number | null>;
  /** A gRPC client of it, closed when the service stops. */
  readonly grpc: RlsClient;
  /** POST /json with `body` (sent as it is if a string, else as JSON). */
  json: (body: unknown) => Promise<{ status: number; type: string | null; body: Record<string, unknown> }>;
  get: (path: string) => Promise<{ status: number; text: string }>;
  /** SIGTERM, as an orchestrator stops it; resolves with its exit code. */
  stop: () => Promise<number | null>;
}

function spawnServe(args: readonly string[]): ChildProcessByStdio<null, null, Readable> {
  return spawn(
    process.execPath,
    [CLI, 'serve', '--grpc-port', '0', '--http-port', '0', '--host', '127.0.0.1', ...args],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
}

/** Calls `line` for each whole line the stream writes. */
function eachLine(stream: Readable, line: (text: string) => void): void {
  let buffered = '';
  stream.on('data', (chunk: Buffer) => {
    const lines = (buffered + chunk.toString()).split('\n');
    buffered = lines.pop() ?? '';
    lines.forEach(line);
  });
}

/**
 * Starts `sluice serve` processes for this test file. A service is killed after the test that
 * started it, unless the test stopped it: so the file's tests run one after another.
 */
export function useServices(): {
  /** Spawns `sluice serve ...args` on free loopback ports; resolves once it counts (rejects with its stderr if it exits first). */
  start(args: readonly string[]): Promise<Service>;
  /** Runs `sluice serve ...args` to its end: its exit code and stderr lines. */
  runToExit(args: readonly string[]): Promise<{ code: number | null; stderr: string[] }>;
} {
  // Each service, and its gRPC client once it listens.
  const running = new Map<ChildProcess, RlsClient | undefined>();
  afterEach(() => {
    for (const [child, grpc] of running) {
      grpc?.close();
      child.kill('SIGKILL');
    }
    running.clear();
  });
  // Commands run to their end may be started for several tests at once (in a before hook).
  const ending = new Set<ChildProcess>();
  after(() => ending.forEach((child) => child.kill('SIGKILL')));

  return {
    async start(args) {
      const child = spawnServe(args);
      const stderr: string[] = [];
      // 'close', not 'exit': by then every line of stderr has been read.
      const exited = once(child, 'close').then(([code]) => code as number | null);
      // The service's last line at start says where it counts; an earlier one gives the ports.
      let ports: { grpcPort: number; httpPort: number } | undefined;
      const listening = new Promise<{ grpcPort: number; httpPort: number }>((resolve, reject) => {
        eachLine(child.stderr, (line) => {
          stderr.push(line);
          const bound = /gRPC(?: \(TLS\))? on 127\.0\.0\.1:(\d+), HTTP(?: \(TLS\))? on 127\.0\.0\.1:(\d+)$/.exec(line);
          if (bound) ports = { grpcPort: Number(bound[1]), httpPort: Number(bound[2]) };
          if (ports && line.startsWith('sluice serve: counting in ')) resolve(ports);
        });
        void exited.then((code) => reject(new Error(`sluice serve exited with ${code}: ${stderr.join('\n')}`)));
      });
      running.set(child, undefined);
      const { grpcPort, httpPort } = await listening;
      const grpc = rlsClient(grpcPort);
      running.set(child, grpc);
      const base = `http://127.0.0.1:${httpPort}`;
      return {
        child,
        grpcPort,
        httpPort,
        stderr,
        exited,
        grpc,
        json: async (body) => {
          const res = await fetch(`${base}/json`, {
            method: 'POST',
            body: typeof body === 'string' ? body : JSON.stringify(body),
          });
          return {
            status: res.status,
            type: res.headers.get('content-type'),
            body: (await res.json()) as Record<string, unknown>,
          };
        },
        get: async (path) => {
          const res = await fetch(`${base}${path}`);
          return { status: res.status, text: await res.text() };
        },
        stop: async () => {
          grpc.close();
          child.kill('SIGTERM');
          const code = await exited;
          running.delete(child);
          return code;
        },
      };
    },

    async runToExit(args) {
      const child = spawnServe(args);
      ending.add(child);
      const stderr: string[] = [];
      eachLine(child.stderr, (line) => {
        stderr.push(line);
        // Serving where it should have refused, it would never end: stopped, it exits 0 for the test to read.
        if (line.startsWith('sluice serve: counting in ')) child.kill('SIGTERM');
      });
      const [code] = (await once(child, 'close')) as [number | null];
      ending.delete(child);
      return { code, stderr };
    },
  };
}

/** A redis-server for a test file's services, and a client of it: started before its tests, stopped after them. */
export function useServiceRedis(): { readonly server: RedisServer; readonly redis: Redis } {
  let started: { server: RedisServer; redis: Redis } | undefined;
  before(async () => {
    const server = await startRedisServer();
    started = { server, redis: new Redis(server.url) };
  });
  after(async () => {
    await started?.redis.quit();
    await started?.server.stop();
  });
  const ready = () => started ?? assert.fail('the redis-server starts before the tests');
  return {
    get server() {
      return ready().server;
    },
    get redis() {
      return ready().redis;
    },
  };
}
