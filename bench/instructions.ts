import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { freePort } from '../src/cli/redis-server.js';
import { THROUGHPUT, redisContenders, type Contender } from './contenders.js';
import { keysFor } from './measure.js';

/*
 * Instructions redis-server executes per decision, counted by valgrind's callgrind: the same count
 * for the same binary and inputs, whatever else the machine is doing, so a change to a script can be
 * judged on a shared machine where timings move by tens of percent. Only command execution is
 * counted (callgrind collects inside Redis's `call()`), not reading or writing sockets.
 *
 *   npx tsx bench/instructions.ts [--single] [name filter...]
 *
 * Batched: 256 decisions asked at once, as 256 calls in flight send them. --single: one at a time.
 * Each contender gets its own server; keys are warmed first, so every measured decision finds its key.
 */
const DECISIONS = 2_560;
const AT_ONCE = 256;

async function connect(port: number): Promise<Redis> {
  for (let attempt = 0; attempt < 150; attempt++) {
    const redis = new Redis(port, {
      lazyConnect: true,
      enableAutoPipelining: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    // Refused while valgrind starts the server: expected, retried here.
    redis.on('error', () => undefined);
    try {
      await redis.connect();
      await redis.ping();
      return redis;
    } catch {
      redis.disconnect();
      await sleep(200);
    }
  }
  throw new Error(`redis-server under valgrind did not answer on port ${port}`);
}

async function run(decide: Contender['decide'], keys: readonly string[], single: boolean): Promise<void> {
  for (let i = 0; i < keys.length; i += single ? 1 : AT_ONCE) {
    await Promise.all(keys.slice(i, i + (single ? 1 : AT_ONCE)).map(decide));
  }
}

/** Instructions per decision for one contender, on a private redis-server under callgrind. */
export async function instructionsPerDecision(pick: (redis: Redis) => Contender, single: boolean): Promise<number> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'sluice-callgrind-'));
  const server = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--toggle-collect=call',
      `--callgrind-out-file=${dir}/out.%p`,
      'redis-server',
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
    ],
    { stdio: 'ignore' },
  );
  const exited = new Promise((resolve) => server.once('exit', resolve));
  try {
    const redis = await connect(port);
    const contender = pick(redis);
    const keys = keysFor(DECISIONS);
    await run(contender.decide, keys, single);
    execFileSync('callgrind_control', ['--zero', String(server.pid)], { stdio: 'ignore' });
    await run(contender.decide, keys, single);
    execFileSync('callgrind_control', ['--dump', String(server.pid)], { stdio: 'ignore' });
    redis.disconnect();
    const dumps = readdirSync(dir)
      .filter((name) => /\.\d+$/.test(name))
      .sort();
    const last = readFileSync(join(dir, dumps.at(-1) ?? 'missing'), 'utf8');
    const total = Number(/^summary: (\d+)/m.exec(last)?.[1] ?? /^totals: (\d+)/m.exec(last)?.[1]);
    return total / DECISIONS;
  } finally {
    server.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(argv: readonly string[]): Promise<void> {
  const single = argv.includes('--single');
  const filters = argv.filter((arg) => !arg.startsWith('--'));
  const names = redisContenders(new Redis({ lazyConnect: true })).map((c) => c.name);
  for (const [i, name] of names.entries()) {
    if (filters.length > 0 && !filters.some((filter) => name.includes(filter))) continue;
    // A server under valgrind runs tens of times slower: a call must not time out (and be answered
    // without Redis) while it waits.
    const perDecision = await instructionsPerDecision(
      (redis) => redisContenders(redis, THROUGHPUT, '1m')[i] as Contender,
      single,
    );
    console.log(
      `${name.padEnd(42)} ${Math.round(perDecision).toLocaleString('en-US').padStart(9)} instructions per decision${single ? ' (one at a time)' : ` (${AT_ONCE} at once)`}`,
    );
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main(process.argv.slice(2)).catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
