/**
 * One contender in a process of its own, measured when the bench asks. Apart, no contender's code
 * shares the JIT's feedback with another's: the loop that calls `decide` sees one function, and a
 * library's inner call sites see only its own algorithm, as in an application that uses one
 * limiter. (In one process, with sluice's five algorithms measured beside one peer class, sluice's
 * shared code turned polymorphic while the peer's stayed monomorphic.)
 *
 * Started by startContender() with its name and store; it answers each Order with one Sample (or,
 * in process, decisions/s) after a warm-up of the same load.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { Redis } from 'ioredis';
import { inProcessContenders, incrCeiling, redisContenders, type Contender } from './contenders.js';
import { combine, keysFor, measure, measureInProcess, run, type InProcessRate, type Sample } from './measure.js';

/** Which contender a process holds: its name, and where it decides. */
export interface ContenderSpec {
  readonly name: string;
  /** A Redis URL, or 'memory' for a contender that decides in its own process. */
  readonly store: string;
}

/** One measurement: warm up with the same load for `warmUpMs`, then measure for `durationMs`. */
export interface Order {
  readonly keys: number;
  /** Calls in flight; absent in process, where decisions are awaited one at a time. */
  readonly inFlight?: number;
  readonly durationMs: number;
  readonly warmUpMs: number;
}

type Reply = { readonly sample: Sample } | { readonly rate: InProcessRate } | { readonly error: string };

/** A contender's process, ready for orders. */
export interface ContenderProcess {
  readonly name: string;
  measure(order: Order & { inFlight: number }): Promise<Sample>;
  measureInProcess(order: Order): Promise<InProcessRate>;
  stop(): void;
}

const LATE_MS = 60_000;

export async function startContender(spec: ContenderSpec): Promise<ContenderProcess> {
  const child: ChildProcess = fork(new URL(import.meta.url), [JSON.stringify(spec)], {
    execArgv: ['--import', 'tsx'],
    serialization: 'advanced',
  });
  // Ready once the contender is built (and, for Redis, connected); a child that fails first exits.
  await Promise.race([
    once(child, 'message'),
    once(child, 'exit').then(([code]) => {
      throw new Error(`${spec.name}: its process exited with ${String(code)} before it was ready`);
    }),
  ]);
  const ask = (order: Order) =>
    new Promise<Reply>((resolve, reject) => {
      const late = setTimeout(
        () => reject(new Error(`${spec.name}: no answer ${LATE_MS} ms after its run should have ended`)),
        order.warmUpMs + order.durationMs + LATE_MS,
      );
      child.once('message', (reply: Reply) => {
        clearTimeout(late);
        if ('error' in reply) reject(new Error(`${spec.name}: ${reply.error}`));
        else resolve(reply);
      });
      child.send(order);
    });
  return {
    name: spec.name,
    measure: async (order) => {
      const reply = await ask(order);
      if (!('sample' in reply)) throw new Error(`${spec.name}: replied ${JSON.stringify(reply)} to a closed loop`);
      return reply.sample;
    },
    measureInProcess: async (order) => {
      const reply = await ask(order);
      if (!('rate' in reply)) throw new Error(`${spec.name}: replied ${JSON.stringify(reply)} in process`);
      return reply.rate;
    },
    stop: () => child.kill(),
  };
}

/** The server's CPU time so far (user + system), in µs. */
async function redisCpuUs(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const seconds = (field: string) => Number(new RegExp(`^${field}:([\\d.]+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  return (seconds('used_cpu_user') + seconds('used_cpu_sys')) * 1e6;
}

/**
 * A sample with the CPU the Redis server spent per decision: the bench measures one contender at
 * a time, so the server's CPU over the run is that contender's (and, alike for all, the server's own
 * housekeeping and these two INFO calls).
 */
async function measureWithRedisCpu(
  redis: Redis,
  decide: Contender['decide'],
  keys: readonly string[],
  inFlight: number,
  durationMs: number,
): Promise<Sample> {
  const before = await redisCpuUs(redis);
  const measured = await run(decide, keys, inFlight, durationMs);
  const spent = (await redisCpuUs(redis)) - before;
  return { ...combine([measured]), redisCpuUs: spent / measured.done };
}

/** The child's side: build the one contender, then measure it for each order. */
async function serveOrders(spec: ContenderSpec): Promise<void> {
  let contender: Contender | undefined;
  let redis: Redis | undefined;
  if (spec.store === 'memory') contender = inProcessContenders().find((c) => c.name === spec.name);
  else {
    redis = new Redis(spec.store, { enableAutoPipelining: true });
    await redis.ping();
    contender = [...redisContenders(redis), incrCeiling(redis)].find((c) => c.name === spec.name);
  }
  if (contender === undefined) throw new Error(`no contender named ${spec.name} on ${spec.store}`);
  const { decide } = contender;
  process.on('message', (order: Order) => {
    const keys = keysFor(order.keys);
    const measured =
      order.inFlight === undefined
        ? measureInProcess(decide, keys, order.warmUpMs).then(async () => ({
            rate: await measureInProcess(decide, keys, order.durationMs),
          }))
        : measure(decide, keys, order.inFlight, order.warmUpMs).then(async () => ({
            sample: await measureWithRedisCpu(redis as Redis, decide, keys, order.inFlight as number, order.durationMs),
          }));
    measured.then(
      (reply) => process.send?.(reply),
      (error: unknown) => process.send?.({ error: error instanceof Error ? error.message : String(error) }),
    );
  });
  process.on('disconnect', () => {
    redis?.disconnect();
    process.exit(0);
  });
  process.send?.('ready');
}

if (process.send !== undefined && process.argv[2] !== undefined) {
  await serveOrders(JSON.parse(process.argv[2]) as ContenderSpec);
}
