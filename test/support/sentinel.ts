import type { Redis } from 'ioredis';
import type { RedisServer } from '../../src/cli/redis-server.js';
import { onEachNode, waitFor } from './cluster.js';
import { startTestServer } from './servers.js';

/** The name the Sentinels know the master by. */
export const MASTER_NAME = 'sluice';

/** A master and a replica of it, watched by three Sentinels (quorum 2), on loopback. */
export interface SentinelGroup {
  /** The two data servers, the first the master at the start. */
  readonly servers: readonly RedisServer[];
  readonly sentinels: readonly RedisServer[];
  /** Where a Sentinel client starts: every Sentinel. */
  readonly sentinelNodes: readonly { host: string; port: number }[];
  /** The master's port, as the first Sentinel sees it now. */
  master(): Promise<number>;
  /** The master's port, once the Sentinels agree on it, on the other server as a replica, and on each other. */
  settled(): Promise<number>;
  stop(): Promise<void>;
}

/** A reply of SENTINEL REPLICAS or SENTINELS (one flat list of names and values per server) as maps. */
function described(reply: unknown): Map<string, string>[] {
  return (reply as string[][]).map(
    (flat) => new Map(flat.flatMap((value, i) => (i % 2 === 0 ? [[value, String(flat[i + 1])] as const] : []))),
  );
}

interface View {
  master: number;
  healthyReplicas: number;
  otherSentinels: number;
}

async function viewOf(sentinel: Redis): Promise<View> {
  const [address, replicas, sentinels] = await Promise.all([
    sentinel.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME) as Promise<string[] | null>,
    sentinel.call('SENTINEL', 'REPLICAS', MASTER_NAME).then(described),
    sentinel.call('SENTINEL', 'SENTINELS', MASTER_NAME).then(described),
  ]);
  return {
    master: Number(address?.[1]),
    healthyReplicas: replicas.filter((r) => r.get('flags') === 'slave' && r.get('master-link-status') === 'ok').length,
    otherSentinels: sentinels.filter((s) => s.get('flags') === 'sentinel').length,
  };
}

/**
 * Starts the master, its replica and three Sentinels, and waits until they are settled. Sentinels
 * call a master down after 1 s without a reply (the default, 30 s, would make a test wait as long).
 */
export async function startSentinelGroup(): Promise<SentinelGroup> {
  const started: RedisServer[] = [];
  const stop = async () => {
    await Promise.all(started.map((server) => server.stop()));
  };
  try {
    const master = await startTestServer(['--repl-diskless-sync-delay', '0']);
    started.push(master);
    const replica = await startTestServer([
      '--repl-diskless-sync-delay',
      '0',
      '--replicaof',
      '127.0.0.1',
      String(master.port),
    ]);
    started.push(replica);
    const sentinelArgs = [
      ...['--sentinel', 'monitor', MASTER_NAME, '127.0.0.1', String(master.port), '2'],
      ...['--sentinel', 'down-after-milliseconds', MASTER_NAME, '1000'],
      ...['--sentinel', 'failover-timeout', MASTER_NAME, '5000'],
    ];
    const sentinels = await Promise.all([1, 2, 3].map(() => startTestServer(sentinelArgs, { sentinel: true })));
    started.push(...sentinels);
    const servers = [master, replica];
    const group: SentinelGroup = {
      servers,
      sentinels,
      sentinelNodes: sentinels.map((s) => ({ host: '127.0.0.1', port: s.port })),
      async master() {
        const [view] = await onEachNode(sentinels.slice(0, 1), viewOf);
        return view?.master ?? 0;
      },
      async settled() {
        let agreed = 0;
        await waitFor('the Sentinels agree on a master, with its replica in sync, and see each other', async () => {
          const views = await onEachNode(sentinels, viewOf);
          agreed = views[0]?.master ?? 0;
          return views.every((v) => v.master === agreed && v.healthyReplicas === 1 && v.otherSentinels === 2);
        });
        return agreed;
      },
      stop,
    };
    await group.settled();
    return group;
  } catch (error) {
    await stop();
    throw error;
  }
}
