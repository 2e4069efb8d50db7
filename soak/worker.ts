/**
 * One soak worker process: a cluster client (ioredis or node-redis) through the proxies, the plan's
 * limiters on their keys, and `loops` callers hammering them at random until told to stop. Every
 * call goes to its history file, and every store step of a leased limiter too. It prints "ready"
 * once connected, starts on "go" and stops on "stop" (or when stdin closes, as it does if the soak
 * dies), finishing the calls in flight and giving back the leases it holds.
 *
 * argv: a WorkerConfig as JSON
 */
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster } from 'ioredis';
import { createCluster } from 'redis';
import { callKeys } from '../src/core/keys.js';
import { enginePolicy } from '../src/engine/algorithm.js';
import { argsCall } from '../src/engine/driver.js';
import { policyUnitsTaken, replyAllowed, replyNowMs } from '../src/engine/reply.js';
import { createLimiter, redisStore, type Decision, type Limiter, type RedisClient, type Store } from '../src/index.js';
import { historyWriter, type CallRecord, type ReleaseRecord, type Timed } from './history.js';
import { soakLimiters, TIMEOUT_MS, type SoakLimiter } from './plan.js';
import { clock, timeTelling } from './time-telling.js';

export interface WorkerConfig {
  readonly index: number;
  readonly client: 'ioredis' | 'node-redis';
  /** `advised`: the client options docs/reliability.md gives for outages; `defaults`: the client's own. */
  readonly clientOptions: 'advised' | 'defaults';
  readonly onStoreError: 'allow' | 'deny';
  readonly prefix: string;
  /** Where the client starts: the proxies' ports. */
  readonly rootPorts: readonly number[];
  /** Each node's own port to its proxy's: the cluster names its nodes by their own ports. */
  readonly proxyOf: Readonly<Record<number, number>>;
  readonly historyPath: string;
  /** Callers at once, each waiting up to `pauseMs` (at random) between its calls. */
  readonly loops: number;
  readonly pauseMs: number;
}

// A lease is held this long at most, and one in ten is never released: it expires.
const HOLD_MS = 300;
const ABANDONED = 0.1;
const MEMORY_EVERY_MS = 1_000;

const config = JSON.parse(process.argv[2] ?? '') as WorkerConfig;
const pick = <T>(list: readonly T[]): T => list[Math.floor(Math.random() * list.length)] as T;

async function connect(): Promise<{ client: RedisClient; close: () => Promise<void> }> {
  const host = '127.0.0.1';
  const proxied = (address: string) => {
    const proxy = config.proxyOf[Number(address.split(':')[1])];
    return proxy === undefined ? undefined : { host, port: proxy };
  };
  const advised = config.clientOptions === 'advised';
  // Connections drop and time out all the time here; the limiters' decisions say what it cost.
  const expected = () => undefined;
  if (config.client === 'ioredis') {
    const cluster = new Cluster(
      config.rootPorts.map((port) => ({ host, port })),
      {
        natMap: (address) => proxied(address) ?? null,
        ...(advised && {
          enableOfflineQueue: false,
          clusterRetryStrategy: (times: number) => Math.min(times * 100, 2_000),
          slotsRefreshTimeout: 1_000,
          redisOptions: { connectTimeout: 1_000, commandTimeout: 500, maxRetriesPerRequest: 1 },
        }),
      },
    );
    cluster.on('error', expected);
    cluster.on('node error', expected);
    await once(cluster, 'ready');
    return { client: cluster, close: () => cluster.quit().then(() => undefined) };
  }
  const cluster = createCluster({
    rootNodes: config.rootPorts.map((port) => ({ url: `redis://${host}:${port}` })),
    nodeAddressMap: proxied,
    ...(advised && {
      defaults: {
        disableOfflineQueue: true,
        socket: { connectTimeout: 1_000, reconnectStrategy: (retries: number) => Math.min(retries * 100, 2_000) },
      },
    }),
  });
  cluster.on('error', expected);
  await cluster.connect();
  return { client: cluster, close: () => cluster.close() };
}

const { client, close } = await connect();
const redis = redisStore(client);
const { store, timed } = timeTelling(redis);
const history = historyWriter(config.historyPath);

/** Steps sent and not yet ended: the history is closed after them. */
const stepsInFlight = new Set<Promise<void>>();
let steps = 0;

/** The store of `soak`'s leased limiter: writes each step to the history before it is sent, and when it ends. */
function recordingSteps(soak: SoakLimiter): Store {
  // A step's client key, by the first of its Redis keys (every key of a client shares its stem).
  const keyOf = new Map(soak.keys.map((key) => [callKeys(config.prefix, key, [enginePolicy(soak.policy)])[0], key]));
  const worker = config.index;
  return {
    run(script, keys, args, deadline) {
      const id = steps++;
      const { op, cost, target } = argsCall(args);
      history.write({
        type: 'step',
        worker,
        id,
        limiter: soak.name,
        key: keyOf.get(keys[0] ?? '') ?? String(keys[0]),
        op,
        cost: cost ?? NaN,
        ...(op === 'refund' && { chargedAtMs: target }),
        startMs: clock(),
      });
      const running = redis.run(script, keys, args, deadline);
      const ended = running.then(
        (reply) =>
          history.write({
            type: 'step-end',
            worker,
            id,
            endMs: clock(),
            serverMs: replyNowMs(reply),
            allowed: replyAllowed(reply),
            ...(op === 'take' && replyAllowed(reply) && { taken: policyUnitsTaken(reply, 0) }),
          }),
        (error: unknown) => history.write({ type: 'step-end', worker, id, endMs: clock(), error: String(error) }),
      );
      stepsInFlight.add(ended);
      void ended.finally(() => stepsInFlight.delete(ended));
      return running;
    },
  };
}

const limiters = soakLimiters.map((soak) => ({
  soak,
  limiter: createLimiter({
    store: soak.lease === undefined ? store : recordingSteps(soak),
    policy: soak.policy,
    prefix: config.prefix,
    timeout: TIMEOUT_MS,
    onStoreError: config.onStoreError,
    onOutage: () => undefined,
    ...(soak.lease !== undefined && { lease: soak.lease }),
  }),
}));

/** A call's times, as the history keeps them. */
const times = ({ startMs, endMs, timerLateMs, afterTimerMs }: Timed): Timed => ({
  startMs,
  endMs,
  timerLateMs,
  afterTimerMs,
});

/** One call, recorded; a concurrency lease is held a while, then released (or left to expire). */
async function call(soak: SoakLimiter, limiter: Limiter, key: string): Promise<void> {
  const leased = soak.invariant.kind === 'concurrency';
  const cost = !leased && Math.random() < 0.2 ? 2 : 1;
  const made = await timed<Decision>(() => (leased ? limiter.acquire(key) : limiter.limit(key, { cost })));
  const decision = made.value;
  const base = { type: 'call', worker: config.index, limiter: soak.name, key, cost, ...times(made) } as const;
  if (!decision) {
    history.write({ ...base, outcome: 'rejected', error: String(made.error) });
    return;
  }
  // A leased limiter's decision may come from units taken by an earlier step: the time of that step.
  const serverMs = soak.lease === undefined ? made.serverMs : decision.decidedAt;
  const record: CallRecord = {
    ...base,
    outcome: decision.allowed ? 'allowed' : 'denied',
    ...(decision.reason === undefined ? { serverMs } : { reason: decision.reason }),
  };
  if (
    !leased ||
    !decision.allowed ||
    decision.reason !== undefined ||
    !('release' in decision) ||
    Math.random() < ABANDONED
  ) {
    history.write(record);
    return;
  }
  await sleep(Math.random() * HOLD_MS);
  const lease = decision as Decision & { release(): Promise<boolean> };
  const released = await timed(() => lease.release());
  const release: ReleaseRecord =
    released.value === undefined
      ? { ...times(released), outcome: 'failed' }
      : { ...times(released), outcome: released.value ? 'released' : 'not-held', serverMs: released.serverMs };
  history.write({ ...record, release });
}

let running = true;
async function hammer(): Promise<void> {
  while (running) {
    const { soak, limiter } = pick(limiters);
    await call(soak, limiter, pick(soak.keys));
    await sleep(Math.random() * config.pauseMs);
  }
}

const memory = setInterval(() => {
  const { rss, heapUsed } = process.memoryUsage();
  history.write({ type: 'memory', worker: config.index, atMs: Date.now(), rssBytes: rss, heapUsedBytes: heapUsed });
}, MEMORY_EVERY_MS);

const commands = createInterface({ input: process.stdin });
const stopped = new Promise<void>((resolve) => {
  commands.on('line', (line) => line === 'stop' && resolve());
  commands.on('close', resolve);
});
process.stdout.write('ready\n');
// A spare worker the soak did not need is stopped before it was told to go: it makes no call.
running = await Promise.race([
  stopped.then(() => false),
  new Promise<boolean>((resolve) => commands.on('line', (line) => line === 'go' && resolve(true))),
]);

const loops = Array.from({ length: config.loops }, hammer);
await stopped;
running = false;
await Promise.all(loops);
clearInterval(memory);
commands.close();
// The leases held are given back; every step is over before the history is closed.
await Promise.all(limiters.filter(({ soak }) => soak.lease !== undefined).map(({ limiter }) => limiter.close()));
while (stepsInFlight.size > 0) await Promise.all(stepsInFlight);
history.close();
await close();
