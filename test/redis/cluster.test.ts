import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { GlideClusterClient } from '@valkey/valkey-glide';
import { Cluster, Redis } from 'ioredis';
import { Cluster as ValkeyCluster } from 'iovalkey';
import { createCluster } from 'redis';
import { scriptFor } from '../../src/engine/driver.js';
import { createLimiter, redisStore, type Limiter } from '../../src/index.js';
import { algorithms } from '../support/algorithms.js';
import {
  clusterSettled,
  onEachNode,
  shardOfSlot,
  startRedisCluster,
  waitFor,
  type RedisCluster,
} from '../support/cluster.js';
import { flushScripts, glideConfig, keysWithTtl, uniquePrefix } from '../support/redis.js';
import { testServer } from '../support/servers.js';
import { awayFromWindowEnd } from '../support/window-edge.js';
import { enginePolicy } from '../../src/engine/algorithm.js';

const HOUR = 3_600_000;

/** The ports of the master and the replica serving `key`'s slot. */
async function shardOf(redis: Redis, key: string): Promise<{ master: number; replica: number }> {
  return shardOfSlot(redis, Number(await redis.cluster('KEYSLOT', key)));
}

describe(`${testServer.name} cluster: failover and script cache loss`, () => {
  let cluster: RedisCluster;
  let ioCluster: Cluster;
  let nodeCluster: ReturnType<typeof createCluster>;
  let valkeyCluster: ValkeyCluster;
  let glideCluster: GlideClusterClient;
  before(async () => {
    cluster = await startRedisCluster();
    ioCluster = new Cluster([...cluster.rootNodes]);
    await new Promise((resolve) => ioCluster.once('ready', resolve));
    nodeCluster = createCluster({ rootNodes: cluster.rootNodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })) });
    await nodeCluster.connect();
    valkeyCluster = new ValkeyCluster([...cluster.rootNodes]);
    await new Promise((resolve) => valkeyCluster.once('ready', resolve));
    glideCluster = await GlideClusterClient.createClient(glideConfig(cluster.rootNodes));
  });
  after(async () => {
    glideCluster.close();
    await valkeyCluster.quit();
    await nodeCluster.close();
    await ioCluster.quit();
    await cluster.stop();
  });
  // A failover takes seconds, counted in one hour-long window.
  beforeEach(() => awayFromWindowEnd(HOUR, 30_000));

  const clients = () => ({
    ioredis: ioCluster,
    'node-redis': nodeCluster,
    iovalkey: valkeyCluster,
    'valkey-glide': glideCluster,
  });

  it('each cluster client sends a call to the node that owns its keys: no MOVED redirection', async () => {
    await onEachNode(cluster.nodes, (node) => node.config('RESETSTAT'));
    for (const [name, client] of Object.entries(clients())) {
      const limiter = createLimiter({
        store: redisStore(client),
        policy: algorithms[0]!.policy(10, HOUR),
        prefix: uniquePrefix(),
        timeout: '5s',
      });
      // 60 clients' keys, over about as many slots: alone, then in batches of one slot each.
      for (let i = 0; i < 60; i++) assert.equal((await limiter.limit(`user:${i}`)).remaining, 9, name);
      const batched = await Promise.all(Array.from({ length: 120 }, (_, i) => limiter.limit(`user:${i % 60}`)));
      assert.deepEqual(new Set(batched.map((d) => d.reason)), new Set([undefined]), name);
    }
    const errors = await onEachNode(cluster.nodes, (node) => node.info('errorstats'));
    assert.deepEqual(
      errors.filter((stats) => stats.includes('errorstat_MOVED')),
      [],
    );
  });

  it('a replica promoted with CLUSTER FAILOVER (its script cache empty) goes on counting, through every cluster client', async () => {
    const prefix = uniquePrefix();
    const limiters: Limiter[] = algorithms.flatMap((algorithm) =>
      Object.values(clients()).map((client, i) =>
        createLimiter({
          store: redisStore(client),
          policy: algorithm.policy(10, HOUR),
          prefix: `${prefix}-${i}`,
          timeout: '5s',
          onStoreError: 'deny',
        }),
      ),
    );
    // Every limiter's key for client "k" has the hash tag {k}: one slot, one shard.
    for (const limiter of limiters) assert.equal((await limiter.limit('k', { cost: 3 })).remaining, 7);

    const any = new Redis(cluster.rootNodes[0]?.port ?? 0, '127.0.0.1');
    const { master, replica } = await shardOf(any, 'k').catch((error: unknown) => {
      any.disconnect();
      throw error;
    });
    const promoted = new Redis(replica, '127.0.0.1');
    try {
      const shas = [...new Set(limiters.map((l) => scriptFor([enginePolicy(l.policy).kind]).sha))];
      assert.deepEqual(
        await promoted.script('EXISTS', ...shas),
        shas.map(() => 0),
        'the replica has never seen the scripts',
      );

      // Calls made during the failover never reject: they are decided by Redis or by the failure policy.
      const during = Promise.all(limiters.map((limiter) => limiter.limit('during')));
      assert.equal(await promoted.cluster('FAILOVER'), 'OK');
      await waitFor('the replica is a master', async () => (await promoted.role())[0] === 'master');
      await waitFor('the cluster is settled after the failover', () => clusterSettled(cluster.nodes));
      assert.equal((await during).length, limiters.length);
      assert.deepEqual(await shardOf(any, 'k'), { master: replica, replica: master });

      for (const limiter of limiters) {
        const decision = await limiter.limit('k');
        assert.deepEqual([decision.allowed, decision.remaining, decision.reason], [true, 6, undefined], limiter.prefix);
      }
      await flushScripts(ioCluster);
      for (const limiter of limiters) assert.equal((await limiter.limit('k')).remaining, 5);
      for (const limiter of limiters) {
        const ttls = await keysWithTtl(ioCluster, limiter.prefix);
        assert.ok(ttls.size >= 1);
        for (const [key, ttl] of ttls) assert.ok(ttl > 0, `${key} has PTTL ${ttl}`);
      }
    } finally {
      any.disconnect();
      promoted.disconnect();
    }
  });
});
