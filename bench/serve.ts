import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { startRedisServer } from '../src/cli/redis-server.js';
import { createLimiter, fixedWindow, redisStore } from '../dist/esm/index.js';
import { rateLimitService } from '../dist/esm/serve/grpc.js';
import { keysFor, measure, median, type Decide, type Sample } from './measure.js';

/**
 * One `sluice serve` process (the built command) on a private Redis, asked through gRPC and through
 * POST /json with `inFlight` calls at a time, beside the library in this process on the same Redis.
 * Every key stays under its limit, so each call is a full decision that counts.
 */
export interface ServeBench {
  readonly inProcess: Sample;
  readonly grpc: Sample;
  readonly json: Sample;
}

/** Calls in flight at once, as the target states it. */
export const SERVE_IN_FLIGHT = 64;
const LIMIT = 1_000_000_000;
const CONFIG = `domain: bench\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: ${LIMIT} }\n`;

function best(samples: readonly Sample[]): Sample {
  return {
    decisionsPerSecond: median(samples.map((s) => s.decisionsPerSecond)),
    p50Ms: median(samples.map((s) => s.p50Ms)),
    p99Ms: median(samples.map((s) => s.p99Ms)),
  };
}

/** `redisUrl`: the Redis to count in (the service uses its own prefix); without it, a private redis-server. */
export async function benchServe(options: {
  inFlight: number;
  keys: number;
  durationMs: number;
  runs: number;
  redisUrl?: string;
}): Promise<ServeBench> {
  const own = options.redisUrl === undefined ? await startRedisServer() : undefined;
  const url = options.redisUrl ?? (own as { url: string }).url;
  const dir = await mkdtemp(join(tmpdir(), 'sluice-bench-serve-'));
  await writeFile(join(dir, 'bench.yaml'), CONFIG);
  const child = spawn(
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
  try {
    const ports = await new Promise<{ grpc: number; http: number }>((resolve, reject) => {
      let text = '';
      child.stderr.on('data', (chunk: Buffer) => {
        text += chunk.toString();
        const bound = /gRPC on 127\.0\.0\.1:(\d+), HTTP on 127\.0\.0\.1:(\d+)/.exec(text);
        if (bound) resolve({ grpc: Number(bound[1]), http: Number(bound[2]) });
      });
      child.once('exit', (code) => reject(new Error(`sluice serve exited with ${code}: ${text}`)));
    });
    const grpcJs = await import('@grpc/grpc-js');
    const Client = rateLimitService();
    const client = new Client(`127.0.0.1:${ports.grpc}`, grpcJs.credentials.createInsecure()) as unknown as {
      ShouldRateLimit(request: object, callback: (error: Error | null) => void): void;
      close(): void;
    };
    const body = (key: string) => ({ domain: 'bench', descriptors: [{ entries: [{ key: 'k', value: key }] }] });
    const viaGrpc: Decide = (key) =>
      new Promise<void>((resolve, reject) =>
        client.ShouldRateLimit(body(key), (error) => (error ? reject(error) : resolve())),
      );
    const viaJson: Decide = async (key) => {
      const res = await fetch(`http://127.0.0.1:${ports.http}/json`, {
        method: 'POST',
        body: JSON.stringify(body(key)),
      });
      if (res.status !== 200) throw new Error(`POST /json answered ${res.status}`);
      await res.arrayBuffer();
    };
    const limiter = createLimiter({
      store: redisStore(redis),
      policy: fixedWindow({ limit: LIMIT, window: '1h' }),
      prefix: 'bench-inprocess',
    });
    const inProcess: Decide = (key) => limiter.limit(key);
    const keys = keysFor(options.keys);
    const samples: Record<keyof ServeBench, Sample[]> = { inProcess: [], grpc: [], json: [] };
    // A short warm-up of each path (connections, script cache, JIT), then alternating timed runs.
    for (const decide of [inProcess, viaGrpc, viaJson])
      await measure(decide, keys, options.inFlight, Math.min(500, options.durationMs));
    for (let run = 0; run < options.runs; run++) {
      samples.inProcess.push(await measure(inProcess, keys, options.inFlight, options.durationMs));
      samples.grpc.push(await measure(viaGrpc, keys, options.inFlight, options.durationMs));
      samples.json.push(await measure(viaJson, keys, options.inFlight, options.durationMs));
    }
    client.close();
    return { inProcess: best(samples.inProcess), grpc: best(samples.grpc), json: best(samples.json) };
  } finally {
    child.kill('SIGTERM');
    if (child.exitCode === null) await once(child, 'exit');
    redis.disconnect();
    await own?.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const quick = process.argv.includes('--quick');
  const result = await benchServe({
    inFlight: SERVE_IN_FLIGHT,
    keys: 1000,
    durationMs: quick ? 300 : 3000,
    runs: quick ? 1 : 5,
  });
  const line = (name: string, s: Sample) =>
    `${name.padEnd(22)} ${Math.round(s.decisionsPerSecond).toString().padStart(8)}/s  p50 ${s.p50Ms.toFixed(2)} ms  p99 ${s.p99Ms.toFixed(2)} ms  ${((100 * s.decisionsPerSecond) / result.inProcess.decisionsPerSecond).toFixed(0)}% of in-process`;
  console.log(line('in-process library', result.inProcess));
  console.log(line('sluice serve, gRPC', result.grpc));
  console.log(line('sluice serve, /json', result.json));
}
