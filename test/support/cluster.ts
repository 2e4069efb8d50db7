import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, Redis } from 'ioredis';
import { freePort, type RedisServer } from '../../src/cli/redis-server.js';
import { startTestServer, testServer } from './servers.js';

const run = promisify(execFile);

/** A real Redis Cluster of private redis-servers: masters with one replica each, on loopback. */
export interface RedisCluster {
  readonly nodes: readonly RedisServer[];
  /** Where a cluster client starts: every node, so that one dead node does not stop it. */
  readonly rootNodes: readonly { host: string; port: number }[];
  stop(): Promise<void>;
}

/**
 * One cluster node. The bus port is chosen too: the default (port + 10,000) is above 65,535 for
 * much of the ephemeral range. Its probe can race another process, hence the retries. Replicas
 * sync at once instead of after the default 5 s wait for more replicas to join a diskless sync.
 */
async function startNode(): Promise<RedisServer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startTestServer([
        '--cluster-enabled',
        'yes',
        '--cluster-port',
        String(await freePort()),
        '--cluster-node-timeout',
        '2000',
        '--repl-diskless-sync-delay',
        '0',
      ]);
    } catch (error) {
      if (attempt === 3) throw error;
    }
  }
}

/** Polls `check` every 100 ms until it holds, or fails naming `what` after 30 s. */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(100);
  }
}

/** Runs `command` on a connection of its own to the node on `port`. */
export async function onNode<T>(port: number, command: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis(port, '127.0.0.1', { lazyConnect: true });
  // A node that is down fails connect(); without a listener ioredis would also print the error.
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await command(redis);
  } finally {
    redis.disconnect();
  }
}

/** Runs `command` on a fresh connection to each server (a node, or a Sentinel), closed afterwards. */
export function onEachNode<T>(nodes: readonly RedisServer[], command: (redis: Redis) => Promise<T>): Promise<T[]> {
  return Promise.all(nodes.map((node) => onNode(node.port, command)));
}

/** One node as CLUSTER NODES lists it. */
export interface ClusterNode {
  readonly id: string;
  readonly port: number;
  readonly master: boolean;
  /** A replica's master; undefined for a master. */
  readonly masterId: string | undefined;
  /** The slot ranges a master serves, inclusive. */
  readonly slots: readonly (readonly [number, number])[];
}

/**
 * The cluster as `redis` sees it, from CLUSTER NODES (CLUSTER SLOTS leaves out a replica until its
 * replication offset has moved). A line is
 * `<id> <host:port@bus> <flags> <master id or -> <ping> <pong> <epoch> <link> <slot ranges...>`;
 * a slot being migrated (`[...]`) is not served yet.
 */
export async function clusterNodes(redis: Redis): Promise<ClusterNode[]> {
  const table = (await redis.cluster('NODES')) as string;
  return table
    .trim()
    .split('\n')
    .map((line) => {
      const [id = '', address = '', flags = '', masterId = '-', , , , , ...ranges] = line.split(' ');
      return {
        id,
        port: Number(address.split(/[:@]/)[1]),
        master: flags.split(',').includes('master'),
        masterId: masterId === '-' ? undefined : masterId,
        slots: ranges
          .filter((range) => !range.startsWith('['))
          .map((range) => {
            const [start = -1, end = start] = range.split('-').map(Number);
            return [start, end] as const;
          }),
      };
    });
}

/** The ports of the master and the replica serving `slot`. */
export async function shardOfSlot(redis: Redis, slot: number): Promise<{ master: number; replica: number }> {
  const nodes = await clusterNodes(redis);
  const master = nodes.find((node) => node.master && node.slots.some(([start, end]) => start <= slot && slot <= end));
  const replica = nodes.find((node) => master && node.masterId === master.id);
  if (!master || !replica) throw new Error(`Redis Cluster: no master with a replica for slot ${slot}`);
  return { master: master.port, replica: replica.port };
}

/**
 * Every node reports cluster_state:ok, sees half of the nodes as replicas and none failing (roles
 * travel by gossip, so one node may still see a replica as a master), and every replica is in sync.
 */
export function clusterSettled(nodes: readonly RedisServer[]): Promise<boolean> {
  return onEachNode(nodes, async (redis) => {
    const [info, table, replication] = await Promise.all([
      redis.cluster('INFO'),
      redis.cluster('NODES') as Promise<string>,
      redis.info('replication'),
    ]);
    const flags = table
      .trim()
      .split('\n')
      .map((line) => line.split(' ')[2]?.split(',') ?? []);
    return (
      info.includes('cluster_state:ok') &&
      flags.filter((f) => f.includes('slave')).length === nodes.length / 2 &&
      !flags.some((f) => f.includes('fail') || f.includes('fail?')) &&
      (replication.includes('role:master') || replication.includes('master_link_status:up'))
    );
  }).then((states) => states.every(Boolean));
}

/** Starts `masters` masters and as many replicas (of the test server), joins them with its cli and waits until the cluster is settled. */
export async function startRedisCluster(masters = 3): Promise<RedisCluster> {
  const nodes = await Promise.all(Array.from({ length: masters * 2 }, startNode));
  try {
    await run(testServer.cli, [
      '--cluster',
      'create',
      ...nodes.map((n) => `127.0.0.1:${n.port}`),
      '--cluster-replicas',
      '1',
      '--cluster-yes',
    ]);
    await waitFor('every node is ok and every replica in sync', () => clusterSettled(nodes));
  } catch (error) {
    await Promise.all(nodes.map((n) => n.stop()));
    throw error;
  }
  return {
    nodes,
    rootNodes: nodes.map((n) => ({ host: '127.0.0.1', port: n.port })),
    stop: async () => {
      await Promise.all(nodes.map((n) => n.stop()));
    },
  };
}

/** The nodes a raw client reaches: one for a standalone Redis, every master (or every node) for a cluster. */
export function nodesOf(redis: Redis | Cluster, role: 'master' | 'all'): readonly Redis[] {
  return redis instanceof Cluster ? redis.nodes(role) : [redis];
}
