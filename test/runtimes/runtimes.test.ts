import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { Redis } from 'ioredis';
import { exited, freePort, startRedisServer, type RedisServer } from '../../src/cli/redis-server.js';
import { examplesOf, shownOutput } from '../support/examples.js';
import { startUpstashBridge, type UpstashBridge } from '../support/upstash.js';
import { awayFromWindowEnd } from '../support/window-edge.js';
import { LONG_KEY, clientsWork } from './programs/workload.mjs';

// Every runtime sluice supports runs the built package (dist/, built by `npm test`'s pretest step)
// through its exports map, doing the same work (programs/workload.mjs) and serving the same Hono
// app with the memory store and, where a TCP client runs, a Redis store over ioredis. Each runtime
// is a dev dependency; one that cannot run on this machine is skipped, saying why (see unavailable).
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
  {
    name: 'Deno',
    command: [
      bin('.bin', 'deno'),
      'run',
      '--node-modules-dir=manual',
      '--cached-only',
      '--no-lock',
      '--allow-read',
      '--allow-env',
      '--allow-net=127.0.0.1',
    ],
    programs: ['esm.mjs'],
  },
];

const THIS_MACHINE = `${process.platform}-${process.arch}`;

/**
 * Why a runtime's `command` cannot run on `machine`, or false where it runs. The Node 22 and 24
 * hosts are Linux x64 builds; Bun, Deno and workerd install a build for their platform, where they
 * have one. On Linux x64 every runtime installs, so there one that cannot run is never skipped: its
 * test fails, saying why.
 */
async function unavailable(name: string, command: string, machine = THIS_MACHINE): Promise<string | false> {
  if (machine === 'linux-x64') return false;
  try {
    await run(command, ['--version'], { timeout: 60_000 });
    return false;
  } catch (error) {
    const why = (error as Error).message.split('\n')[0];
    return `${name} cannot run on ${machine} (${why}), skipped: its tests run on Linux x64`;
  }
}

// Asked once, before the tests are declared, so that a runtime's tests are skipped with the reason.
const RUNTIME_WHY = new Map(
  await Promise.all(
    [
      ...RUNTIMES.map((runtime) => [runtime.name, runtime.command[0] ?? ''] as const),
      ['workerd', bin('.bin', 'workerd')] as const,
    ].map(async ([name, command]) => [name, await unavailable(name, command)] as const),
  ),
);

describe('a runtime that cannot run on this machine', () => {
  it('is skipped with a message off Linux x64, and fails its test on Linux x64', async () => {
    const missing = join(root, 'no-such-runtime');
    assert.match(
      (await unavailable('Nowhere', missing, 'darwin-arm64')) || '',
      /^Nowhere cannot run on darwin-arm64 \(.*ENOENT.*\), skipped: its tests run on Linux x64$/,
    );
    assert.equal(await unavailable('Nowhere', missing, 'linux-x64'), false);
    assert.equal(await unavailable('This Node', process.execPath, 'darwin-arm64'), false);
  });
});

/** The partition key draft-8 sends for `key`, by node:crypto: every runtime's SHA-256 must agree. */
const partitionKey = (key: string) =>
  `:${createHash('sha256').update(key).digest().subarray(0, 12).toString('base64')}:`;

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
  return {
    algorithms,
    concurrency: { held: true, refused: false, released: true, again: true },
    waitFor: { first: true, waited: true },
  };
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
    body: {
      type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
      title: 'Too Many Requests: the quota of this client is exceeded',
      status: 429,
      'violated-policies': ['3-per-1h'],
    },
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
      it(
        `${runtime.name}, ${program === 'esm.mjs' ? 'ES module' : 'CommonJS'}: the workload and a Hono app, on the memory and Redis stores`,
        { skip: RUNTIME_WHY.get(runtime.name) },
        async () => {
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
        },
      );
    }
  }

  it(
    "Node (through tsx), Bun and Deno run the README's first example in a project of its own, by the commands the README gives",
    { skip: RUNTIME_WHY.get('Bun') || RUNTIME_WHY.get('Deno') },
    async () => {
      const readme = (await readFile(join(root, 'README.md'), 'utf8')).replace(/\s+/g, ' ');
      const [example = ''] = await examplesOf('README.md');
      const commands = [/`(npx tsx example\.mts)`/, /`(bun example\.mts)`/, /`(deno run -A example\.mts)`/].map(
        (given) => given.exec(readme)?.[1],
      );
      const precisely = /`deno run -A example\.mts` \(precisely: `(--allow-[^`]*)`/.exec(readme)?.[1];
      assert.ok(commands.every(Boolean) && precisely, 'the README says how to run it with Bun and Deno');
      commands.push(`deno run ${precisely} example.mts`);
      // The reader's project: this build of sluice (by its exports map) and ioredis in its node_modules.
      const dir = await mkdtemp(join(tmpdir(), 'sluice-readme-'));
      try {
        await mkdir(join(dir, 'node_modules'));
        await symlink(root, join(dir, 'node_modules', 'sluice'));
        await symlink(bin('ioredis'), join(dir, 'node_modules', 'ioredis'));
        // As `npm init -y` writes it: CommonJS, so the example is an .mts for its top-level await.
        const dependencies = { sluice: '*', ioredis: '*' };
        await writeFile(join(dir, 'package.json'), JSON.stringify({ type: 'commonjs', dependencies }));
        await writeFile(join(dir, 'example.mts'), example);
        for (const command of commands) {
          const [name = '', ...args] = command?.split(' ') ?? [];
          // npx would look for tsx in the reader's project: this one's, run by this Node.
          const [file, ...more] =
            name === 'npx'
              ? [process.execPath, bin('tsx', 'dist', 'cli.mjs'), ...args.slice(1)]
              : [bin('.bin', name), ...args];
          // It counts in a window of a minute.
          await awayFromWindowEnd(60_000, 15_000);
          const { stdout } = await run(file, more, {
            cwd: dir,
            timeout: 60_000,
            env: { ...process.env, DENO_DIR: denoDir, NO_COLOR: '1', REDIS_URL: redis.url },
          });
          assert.equal(stdout, `${shownOutput(example).join('\n')}\n`, command);
        }
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  );
});

/** Workers served by workerd, each in its own isolate on a free loopback port, until `stop`. */
interface ServedWorkers<Name extends string> {
  readonly urls: Readonly<Record<Name, string>>;
  /** What workerd has written so far (its stdout and stderr: the workers' console among it). */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Bundles each worker's module source (its imports resolved from programs/, `sluice` to the built
 * package by its exports map, not to the sources that tsconfig.json's paths name) for the neutral
 * platform, where a Node built-in does not resolve, and serves each as a module worker without
 * nodejs_compat: Web-standard APIs alone, with `bindings` as its env's text bindings. Workers of one
 * source share nothing but that: an isolate each, as Cloudflare runs many. Their fetch() may reach
 * loopback servers the test starts: workerd's default `internet` service reaches public addresses
 * only, so the config names its own.
 */
async function serveWorkers<Name extends string>(
  sources: Record<Name, string>,
  bindings: Record<string, string>,
): Promise<ServedWorkers<Name>> {
  const names = Object.keys(sources) as Name[];
  const dir = await mkdtemp(join(tmpdir(), 'sluice-workerd-'));
  for (const name of names) {
    const bundle = await build({
      stdin: { contents: sources[name], resolveDir: programs, sourcefile: `${name}.mjs`, loader: 'js' },
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
    assert.ok(inputs.includes(join('dist', 'esm', 'index.js')), `${name}'s bundle holds the built package`);
    assert.deepEqual(
      inputs.filter((input) => input.startsWith('src')),
      [],
      `and none of the sources`,
    );
    await writeFile(join(dir, `${name}.js`), bundle.outputFiles[0]?.contents ?? '');
  }
  const texts = Object.entries(bindings).map(
    ([name, text]) => `(name = ${JSON.stringify(name)}, text = ${JSON.stringify(text)})`,
  );
  const worker = (name: Name) => `(
    modules = [(name = "worker", esModule = embed "${name}.js")],
    compatibilityDate = "2025-09-01",
    bindings = [${texts.join(', ')}],
  )`;
  await writeFile(
    join(dir, 'config.capnp'),
    `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    ${names.map((name) => `(name = "${name}", worker = ${worker(name)}),`).join('\n    ')}
    (name = "internet", network = (allow = ["public", "local"])),
  ],
  sockets = [${names.map((name) => `(name = "${name}", address = "127.0.0.1:0", http = (), service = "${name}")`).join(', ')}],
);
`,
  );
  const ports = await Promise.all(names.map(() => freePort()));
  const urls = Object.fromEntries(names.map((name, i) => [name, `http://127.0.0.1:${ports[i]}`])) as Record<
    Name,
    string
  >;
  const args = [
    'serve',
    join(dir, 'config.capnp'),
    ...names.flatMap((name, i) => ['--socket-addr', `${name}=127.0.0.1:${ports[i]}`]),
  ];
  const child = spawn(bin('.bin', 'workerd'), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  for (const stream of [child.stdout, child.stderr])
    stream?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const stop = async () => {
    await exited(child, 'SIGTERM');
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await Promise.all(names.map((name) => listening(child, urls[name], () => output)));
  } catch (error) {
    await stop();
    throw error;
  }
  return { urls, output: () => output, stop };
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

describe(
  "Cloudflare's workerd runs the built package without nodejs_compat",
  { skip: RUNTIME_WHY.get('workerd') },
  () => {
    let redis: RedisServer;
    let bridge: UpstashBridge;
    let direct: Redis;
    let workers: ServedWorkers<'main' | 'twin' | 'example'>;
    before(async () => {
      redis = await startRedisServer();
      bridge = await startUpstashBridge(redis.port);
      direct = new Redis(redis.port, '127.0.0.1', { lazyConnect: true });
      const worker = await readFile(join(programs, 'worker.mjs'), 'utf8');
      const example = /```js\n([\s\S]*?)```/.exec(await readFile(join(root, 'docs', 'runtimes.md'), 'utf8'))?.[1] ?? '';
      workers = await serveWorkers(
        { main: worker, twin: worker, example },
        { UPSTASH_REDIS_REST_URL: bridge.url, UPSTASH_REDIS_REST_TOKEN: bridge.token },
      );
    });
    after(async () => {
      await workers?.stop();
      direct?.disconnect();
      await bridge?.stop();
      await redis?.stop();
    });
    const limited = (url: string) => (address: string) =>
      fetch(`${url}/limited`, { headers: { 'cf-connecting-ip': address } });

    it('has no process and plain-number timers: sluice takes its non-Node paths (src/core/host.ts)', async () => {
      assert.deepEqual(await (await fetch(`${workers.urls.main}/host`)).json(), {
        process: 'undefined',
        timer: 'number',
      });
    });

    it('does the same work with the memory store', async () => {
      assert.deepEqual(await (await fetch(`${workers.urls.main}/work`)).json(), expectedWork());
    });

    it('limits a Hono app by client address over HTTP, as in every runtime', async () => {
      assert.deepEqual(await clientsWork(limited(workers.urls.main)), EXPECTED_HONO);
    });

    it('does the same work with a Redis store over @upstash/redis', async () => {
      assert.deepEqual(await (await fetch(`${workers.urls.main}/upstash/work`)).json(), expectedWork());
    });

    it('limits the Hono app over @upstash/redis, its counts in Redis with a TTL', async () => {
      assert.deepEqual(await clientsWork(limited(`${workers.urls.main}/upstash`)), EXPECTED_HONO);
      // A count for each client: the IPv6 /56 seen four times, the next /56, the IPv4 client.
      const keys = await direct.keys('rt-workerd-hono:*');
      assert.equal(keys.length, 3, keys.join(', '));
      for (const key of keys) {
        const ttl = await direct.pttl(key);
        assert.ok(ttl > 0 && ttl <= 3_600_000, `${key} expires within its window (PTTL ${ttl})`);
      }
    });

    it("shares a client's count between isolates over @upstash/redis; the memory store counts per isolate", async () => {
      const statuses = async (url: string, address: string, times: number) => {
        const seen: number[] = [];
        for (let i = 0; i < times; i++) seen.push((await limited(url)(address)).status);
        return seen;
      };
      assert.deepEqual(await statuses(`${workers.urls.main}/upstash`, '198.51.100.1', 3), [200, 200, 200]);
      assert.deepEqual(await statuses(`${workers.urls.twin}/upstash`, '198.51.100.1', 1), [429]);
      assert.deepEqual(await statuses(workers.urls.main, '198.51.100.2', 3), [200, 200, 200]);
      assert.deepEqual(await statuses(workers.urls.twin, '198.51.100.2', 3), [200, 200, 200]);
    });

    it('sends calls made in one turn as one script, by queueMicrotask where there is no process.nextTick', async () => {
      const scriptCalls = async () => {
        const stats = await direct.info('commandstats');
        return ['evalsha', 'eval'].reduce(
          (sum, name) => sum + Number(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, 'm').exec(stats)?.[1] ?? 0),
          0,
        );
      };
      // The first batch may load its script (NOSCRIPT, then EVAL); the second runs it once.
      assert.deepEqual(await (await fetch(`${workers.urls.main}/upstash/together/first`)).json(), [
        true,
        true,
        true,
        false,
      ]);
      const before = await scriptCalls();
      assert.deepEqual(await (await fetch(`${workers.urls.main}/upstash/together/second`)).json(), [
        true,
        true,
        true,
        false,
      ]);
      assert.equal((await scriptCalls()) - before, 1);
    });

    it('answers requests in flight together in one isolate over @upstash/redis, each client exactly', async () => {
      // Each request's calls go out from its own handler: none waits on another request's fetch().
      const addresses = Array.from({ length: 10 }, (_, i) => `192.0.2.${i}`);
      const statuses = await Promise.all(
        addresses.map((address) =>
          Promise.all([1, 2, 3, 4].map(async () => (await limited(`${workers.urls.main}/upstash`)(address)).status)),
        ),
      );
      assert.deepEqual(
        statuses.map((seen) => seen.sort()),
        addresses.map(() => [200, 200, 200, 429]),
      );
    });

    it('gives up on a REST endpoint that stops answering, though a Worker drops each timer with its request', async () => {
      // A call that waits on forever fails here rather than hanging the file.
      const ask = async (way: string) =>
        (await fetch(`${workers.urls.main}/upstash/deadline/${way}`, { signal: AbortSignal.timeout(20_000) })).json();
      // A first call that answers, in a request that then ends: a timer it left armed would be gone.
      assert.deepEqual(await ask('module'), { allowed: true, reason: null });
      assert.deepEqual(await ask('client-signal'), { allowed: true, reason: null });
      bridge.hold(true);
      try {
        assert.deepEqual(await ask('module'), { allowed: false, reason: 'timeout' });
        assert.deepEqual(await ask('client-signal'), { allowed: false, reason: 'store-error' });
      } finally {
        bridge.hold(false);
      }
    });

    it("serves docs/runtimes.md's Worker: a Hono app over @upstash/redis", async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 11; i++)
        statuses.push((await fetch(workers.urls.example, { headers: { 'cf-connecting-ip': '203.0.113.9' } })).status);
      assert.deepEqual(statuses, [...Array<number>(10).fill(200), 429]);
    });

    it('warns on the console, having no process, when a hook throws', async () => {
      assert.equal(await (await fetch(`${workers.urls.main}/observed`)).json(), true);
      const warning = 'Warning [SLUICE_HOOK_FAILED]: sluice: onDecision threw: hook down';
      for (let waited = 0; !workers.output().includes(warning) && waited < 5_000; waited += 50)
        await new Promise((resolve) => setTimeout(resolve, 50));
      assert.ok(workers.output().includes(warning), workers.output());
    });
  },
);
