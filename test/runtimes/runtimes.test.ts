import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { exited, freePort, startRedisServer, type RedisServer } from '../../src/cli/redis-server.js';
import { LONG_KEY, clientsWork } from './programs/workload.mjs';

// Every runtime sluice supports runs the built package (dist/, built by `npm test`'s pretest step)
// through its exports map, doing the same work (programs/workload.mjs) and serving the same Hono
// app with the memory store and, where a TCP client runs, a Redis store over ioredis. Each runtime is a dev dependency: a missing
// one fails its test, never skips it.
const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');
const programs = join(import.meta.dirname, 'programs');
const bin = (...path: string[]) => join(root, 'node_modules', ...path);
// Installed by pretest into test/runtimes/hosts (its package.json says why not beside the rest).
const host = (name: string) => join(root, 'test', 'runtimes', 'hosts', 'node_modules', name, 'bin', 'node');

interface Runtime {
  readonly name: string;
  /** The command that runs a program file, before the file. */
  readonly command: readonly string[];
  readonly programs: readonly ('esm.mjs' | 'cjs.cjs')[];
}

let denoDir = '';
const RUNTIMES: readonly Runtime[] = [
  { name: `Node ${process.versions.node} (this one)`, command: [process.execPath], programs: ['esm.mjs', 'cjs.cjs'] },
  { name: 'Node 22', command: [host('node22')], programs: ['esm.mjs', 'cjs.cjs'] },
  { name: 'Node 24', command: [host('node24')], programs: ['esm.mjs', 'cjs.cjs'] },
  { name: 'Bun', command: [bin('.bin', 'bun')], programs: ['esm.mjs', 'cjs.cjs'] },
  // npm packages from node_modules as they are (no registry), and network to the test's Redis alone.
  { name: 'Deno', command: [bin('.bin', 'deno'), 'run', '--node-modules-dir=manual', '--cached-only', '--no-lock', '--allow-read', '--allow-env', '--allow-net=127.0.0.1'], programs: ['esm.mjs'] },
];

/** The partition key draft-8 sends for `key`, by node:crypto: every runtime's SHA-256 must agree. */
const partitionKey = (key: string) => `:${createHash('sha256').update(key).digest().subarray(0, 12).toString('base64')}:`;

/** What programs/workload.mjs sees in a runtime where sluice works. */
function expectedWork() {
  const algorithms = Object.fromEntries(
    (['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'gcra'] as const).map((name) => [
      name,
      {
        allowed: [true, true, true, false, false],
        remaining: [2, 1, 0, 0, 0],
        batchAllowed: [true, true, true, false],
        policyField: `"${name}";q=3;w=${name === 'token-bucket' ? 10_800 : 3600};pk=${partitionKey(LONG_KEY)}`,
      },
    ]),
  );
  return { algorithms, concurrency: { held: true, refused: false, released: true, again: true }, waitFor: { first: true, waited: true } };
}

/**
 * What programs/workload.mjs's clientsWork sees from its Hono app: three requests from one IPv6
 * /56 in any spelling, a fourth denied, the next /56 apart; one IPv4 client in any spelling.
 */
const EXPECTED_HONO = {
  statuses: [200, 200, 200, 429, 200, 200, 200, 200, 429],
  neighbour: { policy: `"3-per-1h";q=3;w=3600;pk=${partitionKey('2001:db8:ab:ce00::/56')}`, remaining: '2' },
  denial: {
    contentType: 'application/problem+json',
    retryAfter: true,
    body: { type: 'https://iana.org/assignments/http-problem-types#quota-exceeded', title: 'Too Many Requests: the quota of this client is exceeded', status: 429, 'violated-policies': ['3-per-1h'] },
  },
};

describe('every runtime runs the built package', { concurrency: true }, () => {
  let redis: RedisServer;
  before(async () => {
    redis = await startRedisServer();
    denoDir = await mkdtemp(join(tmpdir(), 'sluice-deno-'));
  });
  after(async () => {
    await redis?.stop();
    if (denoDir) await rm(denoDir, { recursive: true, force: true });
  });

  for (const runtime of RUNTIMES) {
    for (const program of runtime.programs) {
      it(`${runtime.name}, ${program === 'esm.mjs' ? 'ES module' : 'CommonJS'}: the workload and a Hono app, on the memory and Redis stores`, async () => {
        const [command, ...args] = runtime.command as [string, ...string[]];
        const label = `${runtime.name}-${program}`.replace(/\W+/g, '-');
        const { stdout } = await run(command, [...args, join(programs, program), label, String(redis.port)], {
          cwd: root,
          timeout: 60_000,
          env: { ...process.env, DENO_DIR: denoDir, NO_COLOR: '1' },
        });
        const result = JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as unknown;
        const expected = { work: expectedWork(), hono: EXPECTED_HONO };
        assert.deepEqual(result, { memory: expected, redis: expected });
      });
    }
  }
});

/** A worker served by workerd on a free loopback port, until `stop`. */
interface ServedWorker {
  readonly url: string;
  /** What workerd has written so far (its stdout and stderr: the worker's console among it). */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Bundles `entry` (resolving `sluice` to the built package by its exports map, not to the sources
 * that tsconfig.json's paths name) for the neutral platform, where a Node built-in does not
 * resolve, and serves it as a module worker without nodejs_compat: Web-standard APIs alone.
 * (workerd's fetch() reaches public addresses only: a worker that must reach a server the test
 * starts on loopback needs `(name = "internet", network = (allow = ["public", "local"]))` among the
 * services.)
 */
async function serveWorker(entry: string): Promise<ServedWorker> {
  const bundle = await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'neutral',
    format: 'esm',
    mainFields: ['module', 'main'],
    conditions: ['workerd', 'worker', 'browser'],
    tsconfigRaw: {},
    write: false,
    metafile: true,
    logLevel: 'silent',
  });
  const inputs = Object.keys(bundle.metafile.inputs).map((input) => relative(root, resolve(process.cwd(), input)));
  assert.ok(inputs.includes(join('dist', 'esm', 'index.js')), 'the bundle holds the built package');
  assert.deepEqual(inputs.filter((input) => input.startsWith('src')), [], 'and none of the sources');
  const dir = await mkdtemp(join(tmpdir(), 'sluice-workerd-'));
  await writeFile(join(dir, 'worker.js'), bundle.outputFiles[0]?.contents ?? '');
  await writeFile(
    join(dir, 'config.capnp'),
    `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = "main", worker = .worker)],
  sockets = [(name = "http", address = "127.0.0.1:0", http = (), service = "main")],
);
const worker :Workerd.Worker = (
  modules = [(name = "worker", esModule = embed "worker.js")],
  compatibilityDate = "2025-09-01",
);
`,
  );
  const port = await freePort();
  const child = spawn(bin('.bin', 'workerd'), ['serve', join(dir, 'config.capnp'), '--socket-addr', `http=127.0.0.1:${port}`], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  for (const stream of [child.stdout, child.stderr]) stream?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const stop = async () => {
    await exited(child, 'SIGTERM');
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await listening(child, `http://127.0.0.1:${port}`, () => output);
  } catch (error) {
    await stop();
    throw error;
  }
  return { url: `http://127.0.0.1:${port}`, output: () => output, stop };
}

/** Resolves once `url` answers; rejects, with what workerd said, if it exits or takes 20 s. */
async function listening(child: ChildProcess, url: string, output: () => string): Promise<void> {
  const spawnError = new Promise<never>((_, reject) => child.once('error', reject));
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`workerd exited with code ${child.exitCode}:\n${output()}`);
    if (Date.now() > deadline) throw new Error(`workerd did not listen within 20 s:\n${output()}`);
    try {
      await Promise.race([fetch(url, { method: 'HEAD' }), spawnError]);
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

describe("Cloudflare's workerd runs the built package without nodejs_compat", () => {
  let worker: ServedWorker;
  before(async () => {
    worker = await serveWorker(join(programs, 'worker.mjs'));
  });
  after(() => worker?.stop());

  it('does the same work with the memory store', async () => {
    assert.deepEqual(await (await fetch(`${worker.url}/work`)).json(), expectedWork());
  });

  it('limits a Hono app by client address over HTTP, as in every runtime', async () => {
    const request = (address: string) => fetch(`${worker.url}/limited`, { headers: { 'cf-connecting-ip': address } });
    assert.deepEqual(await clientsWork(request), EXPECTED_HONO);
  });

  it('warns on the console, having no process, when a hook throws', async () => {
    assert.equal(await (await fetch(`${worker.url}/observed`)).json(), true);
    const warning = 'Warning [SLUICE_HOOK_FAILED]: an observe() hook threw: hook down';
    for (let waited = 0; !worker.output().includes(warning) && waited < 5_000; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
    assert.ok(worker.output().includes(warning), worker.output());
  });
});
