import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { Redis as Valkey } from 'iovalkey';
import { startRedisServer, type RedisServer } from '../../src/cli/redis-server.js';
import {
  InvalidOptionError,
  StoreError,
  StorePermissionError,
  StoreTimeoutError,
  createLimiter,
  fixedWindow,
  redisStore,
  type StoreFailure,
} from '../../src/index.js';
import { clientKinds } from '../support/clients.js';

const login = { username: 'limited', password: 'secret' };

// Each refusal, and the rule its StorePermissionError names: a command the script calls, the command
// that runs the script, a key.
const refusals = [
  { rules: ['-time'], missing: '+time' },
  { rules: ['-evalsha'], missing: '+evalsha' },
  { rules: ['resetkeys', '~other:*'], missing: '~sluice:*' },
];

describe('store failures: every kind of client fails with the same typed errors', () => {
  let server: RedisServer;
  let admin: Redis;
  before(async () => {
    server = await startRedisServer();
    admin = new Redis(server.url);
  });
  after(async () => {
    admin.disconnect();
    await server.stop();
  });

  for (const [kind, connect] of Object.entries(clientKinds)) {
    it(`${kind}: Redis gone is answered by the failure policy, with a StoreError carrying the cause`, async () => {
      const doomed = await startRedisServer();
      const { client, close } = await connect(doomed.port, { failFast: true });
      try {
        // The fail-fast client fails at once without Redis: only the call Redis answers could meet the
        // timeout, so a generous one keeps a loaded machine's slow reply from reading as a failure.
        const limiter = createLimiter({
          store: redisStore(client),
          policy: fixedWindow({ limit: 5, window: '1s' }),
          onStoreError: 'deny',
          timeout: '1m',
          onOutage: () => {},
        });
        assert.equal((await limiter.limit('k')).allowed, true);
        await doomed.stop();
        const decision = await limiter.limit('k');
        assert.equal(decision.reason, 'store-error');
        assert.ok(decision.error instanceof StoreError);
        assert.equal(decision.error.code, 'SLUICE_STORE_ERROR');
        assert.ok(decision.error.cause instanceof Error);
      } finally {
        await close();
        await doomed.stop();
      }
    });

    it(`${kind}: an ACL refusal is a StorePermissionError naming the rule to grant, for a call alone or in a batch`, async () => {
      await admin.call('ACL', 'SETUSER', login.username, 'reset', 'on', `>${login.password}`, '~*', '+@all');
      const { client, close } = await connect(server.port, { login });
      try {
        for (const { rules, missing } of refusals) {
          await admin.call(
            'ACL',
            'SETUSER',
            login.username,
            'reset',
            'on',
            `>${login.password}`,
            '~*',
            '+@all',
            ...rules,
          );
          // Redis answers these calls (with a refusal): a timeout would only race it on a loaded machine.
          const limiter = createLimiter({
            store: redisStore(client),
            policy: fixedWindow({ limit: 5, window: '1m' }),
            timeout: '1m',
            onOutage: () => {},
          });
          const decisions = [
            await limiter.limit('alone'),
            ...(await Promise.all([limiter.limit('a'), limiter.limit('b')])),
          ];
          assert.deepEqual(
            decisions.map((d) => [d.reason, d.error?.name, d.error instanceof StorePermissionError && d.error.missing]),
            decisions.map(() => ['store-error', 'StorePermissionError', missing]),
            rules.join(' '),
          );
        }
      } finally {
        await close();
      }
    });
  }

  it('a client of no kind it knows is refused at once, naming every kind it accepts', () => {
    for (const notAClient of [{}, { evalsha() {} }, { customCommand() {} }, null, 'redis://127.0.0.1:6379']) {
      assert.throws(
        () => redisStore(notAClient as never),
        (error: unknown) =>
          error instanceof InvalidOptionError &&
          error.option === 'client' &&
          ['ioredis', 'iovalkey', 'node-redis', 'valkey-glide', '@upstash/redis'].every((kind) =>
            error.message.includes(kind),
          ),
      );
    }
  });
});

describe('a refused connection is named as such, not as a timeout', () => {
  for (const [kind, connect] of [
    ['ioredis', (url: string) => new Redis(url)],
    ['iovalkey', (url: string) => new Valkey(url)],
  ] as const) {
    it(`${kind} as it comes (a command waits while it reconnects): the decision, onOutage and reset() say so; Redis decides again once it listens`, async () => {
      const server = await startRedisServer();
      await server.kill(); // its port now refuses connections
      const client = connect(server.url);
      const failures: StoreFailure[] = [];
      const limiter = createLimiter({
        store: redisStore(client),
        policy: fixedWindow({ limit: 5, window: '1h' }),
        timeout: '500ms',
        onOutage: (failure) => failures.push(failure),
      });
      const refused = `sluice: store failed: connection refused by 127.0.0.1:${server.port}`;
      try {
        const decision = await limiter.limit('k');
        assert.deepEqual([decision.allowed, decision.reason, decision.error?.message], [true, 'store-error', refused]);
        assert.ok(!(decision.error instanceof StoreTimeoutError));
        assert.equal((decision.error?.cause as NodeJS.ErrnoException).code, 'ECONNREFUSED');
        await assert.rejects(limiter.reset('k'), { name: 'StoreError', message: refused });
        assert.deepEqual(
          failures.map(({ operation, reason, error }) => [operation, reason, error.message]),
          [
            ['limit', 'store-error', refused],
            ['reset', 'store-error', refused],
          ],
        );
        await server.restart();
        const deadline = Date.now() + 15_000;
        let back = await limiter.limit('k');
        for (; back.reason !== undefined && Date.now() < deadline; back = await limiter.limit('k')) await sleep(50);
        assert.equal(back.reason, undefined, 'decided by Redis again within 15 s of the restart');
      } finally {
        client.disconnect();
        await server.stop();
      }
    });
  }

  it('ioredis failing fast (no offline queue): a call fails with its own error, the refused connection beside it', async () => {
    const server = await startRedisServer();
    await server.kill();
    const client = new Redis(server.url, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
    try {
      const limiter = createLimiter({
        store: redisStore(client),
        policy: fixedWindow({ limit: 5, window: '1h' }),
        onOutage: () => {},
      });
      await once(client, 'error');
      const decision = await limiter.limit('k');
      assert.equal(decision.reason, 'store-error');
      assert.match(
        decision.error?.message ?? '',
        /^sluice: store failed: .+ \(connection refused by 127\.0\.0\.1:\d+\)$/,
      );
    } finally {
      client.disconnect();
      await server.stop();
    }
  });
});
