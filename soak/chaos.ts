import { setTimeout as sleep } from 'node:timers/promises';
import type { RedisServer } from '../src/cli/redis-server.js';
import { clusterNodes, clusterSettled, onNode, waitFor, type ClusterNode } from '../test/support/cluster.js';
import type { Proxy } from '../test/support/proxy.js';
import { keysWithTtl } from '../test/support/redis.js';
import type { FaultKind, FaultRecord, NodeRecord } from './history.js';

export const faultKinds: readonly FaultKind[] = ['kill', 'failover', 'partition', 'pause', 'script-flush'];

/** A cluster node, its own port and the proxy its clients go through. */
export interface ChaosNode {
  readonly server: RedisServer;
  readonly proxy: Proxy;
}

const between = (min: number, max: number) => min + Math.random() * (max - min);
const pick = <T>(list: readonly T[]): T => list[Math.floor(Math.random() * list.length)] as T;

/** The faults a soak injects into a cluster, one at a time, each over once the cluster is settled again. */
export function chaos(nodes: readonly ChaosNode[]) {
  const servers = nodes.map((n) => n.server);
  const byPort = new Map(nodes.map((n) => [n.server.port, n]));

  /** The cluster as the first node that answers sees it. */
  async function topology(): Promise<ClusterNode[]> {
    for (const { port } of servers) {
      const seen = await onNode(port, clusterNodes).catch(() => undefined);
      if (seen) return seen;
    }
    throw new Error('no cluster node answers');
  }

  const settled = () =>
    waitFor('the cluster is settled after a fault', () => clusterSettled(servers).catch(() => false));

  /** Runs one fault and returns what it did; `lostSlots` for a fault that may lose writes. */
  async function inject(kind: FaultKind): Promise<FaultRecord> {
    const cluster = await topology();
    const masters = cluster.filter((n) => n.master && n.slots.length > 0);
    const target = kind === 'failover' ? pick(cluster.filter((n) => !n.master)) : pick(masters);
    if (!target) throw new Error(`no node to ${kind}`);
    const node = byPort.get(target.port);
    if (!node) throw new Error(`node ${target.port} is not this cluster's`);
    const startMs = Date.now();
    switch (kind) {
      case 'kill':
        // Restarted before or after its replica takes over: empty either way (nothing is persisted).
        await node.server.kill();
        await sleep(between(500, 4_000));
        await node.server.restart();
        break;
      case 'failover':
        await onNode(target.port, (redis) => redis.cluster('FAILOVER'));
        await waitFor(
          'the replica is a master',
          async () => (await onNode(target.port, (redis) => redis.role()))[0] === 'master',
        );
        break;
      case 'partition':
        node.proxy.blackHole();
        await sleep(between(1_000, 3_000));
        node.proxy.heal();
        break;
      case 'pause': {
        // WRITE holds scripts (they may write), as a busy or stalled master would.
        const ms = Math.round(between(500, 2_000));
        await onNode(target.port, (redis) => redis.call('CLIENT', 'PAUSE', String(ms), 'WRITE'));
        await sleep(ms);
        break;
      }
      case 'script-flush':
        await Promise.all(servers.map((server) => onNode(server.port, (redis) => redis.script('FLUSH'))));
        break;
    }
    await settled();
    return {
      type: 'fault',
      kind,
      port: kind === 'script-flush' ? 0 : target.port,
      startMs,
      endMs: Date.now(),
      ...(kind === 'kill' && { lostSlots: target.slots }),
    };
  }

  /**
   * Each node's used_memory and, on a master, every key under `prefix` with no TTL. A node that
   * does not answer (killed a moment ago) is left out of this round.
   */
  async function sample(prefix: string): Promise<NodeRecord[]> {
    const seen = await Promise.all(
      servers.map(({ port }) =>
        onNode(port, async (redis): Promise<NodeRecord> => {
          const memory = await redis.info('memory');
          const usedMemoryBytes = Number(/used_memory:(\d+)/.exec(memory)?.[1]);
          const master = (await redis.role())[0] === 'master';
          const ttls = master ? await keysWithTtl(redis, prefix) : new Map<string, number>();
          const ttlLess = [...ttls].filter(([, ttl]) => ttl === -1).map(([key]) => key);
          return { type: 'node', port, atMs: Date.now(), usedMemoryBytes, keys: ttls.size, ttlLess };
        }).catch(() => undefined),
      ),
    );
    return seen.filter((record) => record !== undefined);
  }

  return { inject, sample };
}
