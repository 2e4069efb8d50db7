import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { startRedisServer, type RedisServer } from '../../src/cli/redis-server.js';
import {
  InvalidOptionError,
  StoreError,
  StorePermissionError,
  createLimiter,
  fixedWindow,
  redisStore,
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
