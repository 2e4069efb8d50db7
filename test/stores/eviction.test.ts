import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startRedisServer, type RedisServer } from '../../src/cli/redis-server.js';
import { createLimiter, fixedWindow, redisStore } from '../../src/index.js';
import { evictionWarning } from '../../src/stores/eviction.js';
import { checksEviction, clientKinds } from '../support/clients.js';
import { uniquePrefix } from '../support/redis.js';

/** The SLUICE_EVICTABLE_KEYS warnings' messages emitted while `run` runs, and shortly after. */
async function evictionWarnings(run: () => Promise<void>): Promise<string[]> {
  const seen: string[] = [];
  const listen = (warning: Error) => {
    if ((warning as Error & { code?: string }).code === 'SLUICE_EVICTABLE_KEYS') seen.push(warning.message);
  };
  process.on('warning', listen);
  try {
    await run();
    // The check's reply comes before the first call's; its warning is emitted on a later tick.
    await sleep(50);
  } finally {
    process.off('warning', listen);
  }
  return seen;
}

describe("eviction: a server that may evict sluice's keys is warned about once", () => {
  const servers: RedisServer[] = [];
  after(() => Promise.all(servers.map((server) => server.stop())));

  async function serverWith(args: string[]): Promise<RedisServer> {
    const server = await startRedisServer(args);
    servers.push(server);
    return server;
  }

  const limited = ['--maxmemory', '100mb', '--maxmemory-policy'];
  const settings = [
    { name: 'allkeys-lru, 100mb', args: [...limited, 'allkeys-lru'], warns: 'allkeys-lru' },
    { name: 'volatile-ttl, 100mb', args: [...limited, 'volatile-ttl'], warns: 'volatile-ttl' },
    { name: 'noeviction, 100mb', args: [...limited, 'noeviction'], warns: undefined },
    {
      name: 'allkeys-lru, no memory limit',
      args: ['--maxmemory', '0', '--maxmemory-policy', 'allkeys-lru'],
      warns: undefined,
    },
    // valkey-glide is left out: it asks INFO when it connects, so it cannot connect to this server.
    {
      name: 'allkeys-lru, 100mb, INFO disabled',
      args: [...limited, 'allkeys-lru', '--rename-command', 'INFO', ''],
      warns: undefined,
      without: 'valkey-glide',
    },
  ];

  for (const { name, args, warns: policyWarns, without } of settings) {
    for (const [clientName, connect] of Object.entries(clientKinds).filter(([kind]) => kind !== without)) {
      const warns = checksEviction(clientName) ? policyWarns : undefined;
      it(`${name}, ${clientName}: ${warns ? 'warns once' : 'no warning'}, and calls are decided`, async () => {
        const server = await serverWith(args);
        const { client, close } = await connect(server.port);
        try {
          const limiter = createLimiter({
            store: redisStore(client),
            policy: fixedWindow({ limit: 5, window: '1h' }),
            prefix: uniquePrefix(),
            // Not a test of timeouts: a first call through the REST bridge on a loaded machine can
            // take over the default second.
            timeout: '30s',
          });
          const seen = await evictionWarnings(async () => {
            for (let i = 0; i < 3; i++) assert.equal((await limiter.limit('k')).reason, undefined);
          });
          assert.equal(seen.length, warns ? 1 : 0, seen.join('\n'));
          if (warns)
            assert.match(seen[0] as string, new RegExp(`maxmemory-policy ${warns} and maxmemory 104857600 bytes`));
        } finally {
          await close();
        }
      });
    }
  }

  it('names the policy only when it can evict', () => {
    // INFO's lines, as Redis sends them.
    const info = (maxmemory: number, policy: string) =>
      `# Memory\r\nused_memory:1000\r\nmaxmemory:${maxmemory}\r\nmaxmemory_human:1B\r\nmaxmemory_policy:${policy}\r\n`;
    for (const policy of [
      'allkeys-lru',
      'allkeys-lfu',
      'allkeys-random',
      'volatile-lru',
      'volatile-lfu',
      'volatile-random',
      'volatile-ttl',
    ]) {
      assert.match(
        evictionWarning(info(1, policy)) ?? '',
        new RegExp(`maxmemory-policy ${policy} and maxmemory 1 bytes`),
      );
    }
    assert.equal(evictionWarning(info(1, 'noeviction')), undefined);
    assert.equal(evictionWarning(info(0, 'allkeys-lru')), undefined);
    assert.equal(evictionWarning(''), undefined);
  });
});
