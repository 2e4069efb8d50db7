import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, Redis } from 'ioredis';
import { freePort, startRedisServer, type RedisServer } from '../../src/cli/redis-server.js';

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
      return await startRedisServer(['--cluster-enabled', 'yes', '--cluster-port', String(await freePort()), '--cluster-node-timeout', '2000', '--repl-diskless-sync-delay', '0']);
    } catch (error) {
      if (attempt === 3) throw error;
    }
  }
}

/** Polls `check` every 100 ms until it holds, or fails naming `what` after 30 s. */
export async function waitFor(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(100);
  }
}

/** Runs `command` on a fresh connection to each server (a node, or a Sentinel), closed afterwards. */
export async function onEachNode<T>(nodes: readonly RedisServer[], command: (redis: Redis) => Promise<T>): Promise<T[]> {
  return Promise.all(
    nodes.map(async (node) => {
      const redis = new Redis(node.port, '127.0.0.1', { lazyConnect: true });
      try {
        await redis.connect();
        return await command(redis);
      } finally {
        redis.disconnect();
      }
    }),
  );
}

/**
 * Every node reports cluster_state:ok, sees half of the nodes as replicas and none failing (roles
 * travel by gossip, so one node may still see a replica as a master), and every replica is in sync.
 */
export function clusterSettled(nodes: readonly RedisServer[]): Promise<boolean> {
  return onEachNode(nodes, async (redis) => {
    const [info, table, replication] = await Promise.all([
      redis.cluster('INFO') as Promise<string>,
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

/** Starts `masters` masters and as many replicas, joins them with redis-cli and waits until the cluster is settled. */
export async function startRedisCluster(masters = 3): Promise<RedisCluster> {
  const nodes = await Promise.all(Array.from({ length: masters * 2 }, startNode));
  try {
    await run('redis-cli', ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '1', '--cluster-yes']);
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
