/**
 * The chaos soak: `npm run soak -- --minutes N [--workers N] [--spares N]`. Starts a Redis Cluster
 * (3 masters, 3 replicas) behind one proxy per node, worker processes hammering it through ioredis
 * and node-redis, spare workers to take a killed one's place, and injects faults at random until
 * the time is up; then checks the whole history
 * (soak/check-run.ts) and exits 1 on any invariant violation (2 if the soak itself failed).
 * docs/reliability.md ("Chaos soak") says what is checked, exactly.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { startRedisCluster } from '../test/support/cluster.js';
import { startProxy } from '../test/support/proxy.js';
import { chaos, faultKinds } from './chaos.js';
import { checkRun, formatSummary } from './check-run.js';
import { historyWriter, type FaultKind, type FaultRecord } from './history.js';
import type { WorkerConfig } from './worker.js';

const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));
// Every pairing of client, client options and failure policy, one per worker in turn.
const PROFILES = [
  { client: 'ioredis', clientOptions: 'advised', onStoreError: 'deny' },
  { client: 'node-redis', clientOptions: 'advised', onStoreError: 'allow' },
  { client: 'ioredis', clientOptions: 'defaults', onStoreError: 'allow' },
  { client: 'node-redis', clientOptions: 'defaults', onStoreError: 'deny' },
] as const;
// About 150 calls a second per worker: enough to keep every key over its limit, little enough
// for a 2-core machine that also runs six redis-servers and the proxies.
const LOOPS = 6;
const PAUSE_MS = 60;
const SAMPLE_EVERY_MS = 5_000;
const STOP_WITHIN_MS = 30_000;

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '1' },
    workers: { type: 'string', default: '4' },
    spares: { type: 'string', default: '3' },
  },
});
const minutes = Number(values.minutes);
const workerCount = Number(values.workers);
const spareCount = Number(values.spares);
if (
  !(minutes > 0) ||
  !Number.isInteger(workerCount) ||
  workerCount < 2 ||
  !Number.isInteger(spareCount) ||
  spareCount < 0
) {
  console.error('usage: npm run soak -- --minutes <N > 0> [--workers <N >= 2>] [--spares <N >= 0>]');
  process.exit(2);
}

/** A worker process, started and connected, waiting for "go". */
async function startWorker(config: WorkerConfig) {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', WORKER, JSON.stringify(config)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  while (!output.includes('ready\n')) {
    const [code] = await Promise.race([exited, once(child.stdout ?? child, 'data').then(() => [undefined])]);
    if (code !== undefined) throw new Error(`worker ${config.index} exited with code ${code} before it was ready`);
  }
  return {
    go: () => child.stdin?.write('go\n'),
    /** Tells the worker to stop and waits for it; a failure described, or undefined. */
    async stop(): Promise<string | undefined> {
      child.stdin?.end('stop\n');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_WITHIN_MS);
      const [code, signal] = await exited;
      clearTimeout(timer);
      return code === 0
        ? undefined
        : `worker ${config.index} (${config.client}) exited with ${signal ?? `code ${code}`}`;
    },
    kill: () => child.kill('SIGKILL'),
    /** SIGKILLs the worker and waits for it to be gone: it gives nothing back and writes nothing more. */
    async crash(): Promise<void> {
      child.kill('SIGKILL');
      await exited;
    },
    index: config.index,
  };
}

const between = (min: number, max: number) => min + Math.random() * (max - min);
/** The fault kinds in a random order, each once, again and again: every kind runs in a short soak too. */
function* shuffledRounds() {
  for (;;) {
    const round: FaultKind[] = [...faultKinds, 'worker-kill'];
    for (let i = round.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [round[i], round[j]] = [round[j] as FaultKind, round[i] as FaultKind];
    }
    yield* round;
  }
}

// Stopped in reverse order of start, on the way out, on a failure and on Ctrl-C alike.
const cleanups: (() => unknown)[] = [];
async function cleanUp(): Promise<void> {
  for (let cleanup = cleanups.pop(); cleanup; cleanup = cleanups.pop()) {
    try {
      await cleanup();
    } catch (error) {
      console.error(error);
    }
  }
}
for (const [signal, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
] as const) {
  process.once(signal, () => void cleanUp().then(() => process.exit(code)));
}

const log = (line: string) => console.log(`[soak ${new Date().toISOString().slice(11, 19)}] ${line}`);

try {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-soak-'));
  const prefix = `soak-${randomUUID().slice(0, 8)}`;
  log(`${minutes} min, ${workerCount} workers; history in ${dir}`);
  const cluster = await startRedisCluster();
  cleanups.push(() => cluster.stop());
  const nodes = await Promise.all(
    cluster.nodes.map(async (server) => ({ server, proxy: await startProxy(server.port) })),
  );
  cleanups.push(() => Promise.all(nodes.map(({ proxy }) => proxy.stop())));
  const proxyOf = Object.fromEntries(nodes.map(({ server, proxy }) => [server.port, proxy.port]));

  // The spares (the indexes after the workers') are started now, with the others: a worker started
  // among the faults would load the machine while it compiles, and calls would be answered late.
  const started = await Promise.all(
    Array.from({ length: workerCount + spareCount }, (_, index) =>
      startWorker({
        index,
        ...(PROFILES[index % PROFILES.length] ?? PROFILES[0]),
        prefix,
        rootPorts: nodes.map(({ proxy }) => proxy.port),
        proxyOf,
        historyPath: join(dir, `worker-${index}.jsonl`),
        loops: LOOPS,
        pauseMs: PAUSE_MS,
      }),
    ),
  );
  cleanups.push(() => started.forEach((worker) => worker.kill()));
  const workers = started.slice(0, workerCount);
  const spares = started.slice(workerCount);

  /** Kills a random worker (SIGKILL: its leases are never given back) and sets a spare going in its place. */
  async function killWorker(): Promise<FaultRecord> {
    const [victim] = workers.splice(Math.floor(Math.random() * workers.length), 1);
    const spare = spares.shift();
    if (!victim || !spare) throw new Error('no worker to kill, or no spare to take its place');
    const startMs = Date.now();
    await victim.crash();
    spare.go();
    workers.push(spare);
    return { type: 'fault', kind: 'worker-kill', port: 0, worker: victim.index, startMs, endMs: Date.now() };
  }

  const faults = historyWriter(join(dir, 'faults.jsonl'));
  const samples = historyWriter(join(dir, 'nodes.jsonl'));
  const { inject, sample } = chaos(nodes);
  const startedAt = Date.now();
  const until = startedAt + minutes * 60_000;
  for (const worker of workers) worker.go();
  log('workers started');

  const sampling = (async () => {
    while (Date.now() < until) {
      for (const record of await sample(prefix)) samples.write(record);
      await sleep(Math.min(SAMPLE_EVERY_MS, Math.max(0, until - Date.now())));
    }
  })();
  for (const kind of shuffledRounds()) {
    if (kind === 'worker-kill' && spares.length === 0) continue;
    await sleep(between(2_000, 5_000));
    if (Date.now() >= until) break;
    const fault = kind === 'worker-kill' ? await killWorker() : await inject(kind);
    faults.write(fault);
    const target =
      fault.worker !== undefined ? ` of worker ${fault.worker}` : fault.port ? ` of node ${fault.port}` : '';
    log(`${kind}${target}: ${((fault.endMs - fault.startMs) / 1000).toFixed(1)} s until settled`);
  }
  await sampling;

  // The spares not needed are stopped too, before they were told to go.
  const workerFailures = (await Promise.all([...workers, ...spares].map((worker) => worker.stop()))).filter(
    (failure) => failure !== undefined,
  );
  log(
    `workers stopped after ${((Date.now() - startedAt) / 60_000).toFixed(1)} min; scanning every master for keys without a TTL`,
  );
  for (const record of await sample(prefix)) samples.write(record);
  faults.close();
  samples.close();

  const summary = await checkRun(dir, prefix, workerFailures);
  console.log(formatSummary(summary));
  if (Object.keys(summary.violations).length > 0) {
    log(`history kept in ${dir}`);
    process.exitCode = 1;
  } else {
    await rm(dir, { recursive: true, force: true });
  }
} catch (error) {
  console.error('the soak itself failed:', error);
  process.exitCode = 2;
} finally {
  await cleanUp();
}
