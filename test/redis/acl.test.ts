import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { runCli } from '../../src/cli/run.js';
import { storageKey } from '../../src/core/keys.js';
import {
  concurrency,
  createLimiter,
  fixedWindow,
  InvalidArgumentError,
  slidingWindow,
  StoreError,
  StorePermissionError,
  type RedisClient,
  type Store,
} from '../../src/index.js';
import { redisStore } from '../../src/index.js';
import { algorithms } from '../support/algorithms.js';
import { checksEviction, clientKinds, type Connected } from '../support/clients.js';
import { keysWithTtl, useRedis } from '../support/redis.js';
import { testServer } from '../support/servers.js';
import { awayFromWindowEnd } from '../support/window-edge.js';

const HOUR = 3_600_000;
const harness = useRedis();

/** The words after `ACL SETUSER` in docs/reliability.md: the user's name, then its rules. */
async function documentedAcl(): Promise<{ user: string; password: string; rules: string[] }> {
  const doc = await readFile(new URL('../../docs/reliability.md', import.meta.url), 'utf8');
  const lines = doc.split('\n').filter((line) => line.startsWith('ACL SETUSER '));
  assert.equal(lines.length, 1, 'docs/reliability.md gives one ACL SETUSER line');
  const [user = '', ...rules] = (lines[0] ?? '').trim().split(/\s+/).slice(2);
  const password = rules.find((rule) => rule.startsWith('>'))?.slice(1) ?? '';
  return { user, password, rules };
}

/** ACL LOG as [reason, object] pairs: what Redis refused, and whether a command or a key. */
async function refusals(admin: Redis): Promise<string[][]> {
  const entries = (await admin.call('ACL', 'LOG')) as unknown[][];
  return entries.map((entry) => {
    const fields = new Map<unknown, unknown>();
    for (let i = 0; i < entry.length; i += 2) fields.set(entry[i], entry[i + 1]);
    return [String(fields.get('reason')), String(fields.get('object'))];
  });
}

/**
 * Every operation of every algorithm, so that each command sluice's scripts call runs at least once:
 * peek, limit until denied, refunds, block, a block that has ended, the penalty box, a denial that
 * empties a sliding window, limitMany (the batch script), leases (acquire, extend, release) and
 * reset. Scripts are flushed first, so EVAL runs too. Returns what each call answered, with the
 * failures of calls that have a decision to fall back on collected in `failures`.
 */
async function everyOperation(store: Store, failures: StoreError[]): Promise<unknown[]> {
  await harness.redis.script('FLUSH');
  const run = randomUUID().slice(0, 8);
  const onOutage = ({ error }: { error: StoreError }) => failures.push(error);
  const settled = (call: Promise<unknown>) =>
    call.then(
      (value) => value ?? 'done',
      (error: unknown) => (error instanceof StoreError ? failures.push(error) && 'rejected' : Promise.reject(error)),
    );
  // What this checks is what Redis refuses, not how fast it answers: a loaded CI machine may take seconds.
  const timeout = '20s';
  const answers: unknown[] = [];
  for (const algorithm of algorithms) {
    const limiter = createLimiter({
      store,
      policy: algorithm.policy(2, HOUR),
      onStoreError: 'deny',
      onOutage,
      timeout,
    });
    const key = `${algorithm.name}-${run}`;
    answers.push(algorithm.name, (await limiter.peek(key)).remaining);
    for (let i = 0; i < 3; i++) answers.push((await limiter.limit(key)).remaining);
    answers.push(await settled(limiter.refund(key, 1)), await settled(limiter.refund(key, 2)));
    answers.push(await settled(limiter.block(key, '1h')));
    // A block that lost its TTL gets it back from the end it holds (PEXPIREAT).
    await harness.redis.persist(storageKey(limiter.prefix, key, 'blk'));
    answers.push((await limiter.limit(key)).blockedForMs !== undefined);
    await harness.redis.set(storageKey(limiter.prefix, key, 'blk'), '1');
    answers.push((await limiter.limit(key)).allowed);
    answers.push((await limiter.limitMany([`${key}-a`, `${key}-b`])).map((d) => d.remaining));
    answers.push(await settled(limiter.reset(key)));
  }
  const penalty = createLimiter({
    store,
    policy: fixedWindow({ limit: 1, window: HOUR }),
    penalty: { after: 2, block: '1h' },
    onStoreError: 'deny',
    onOutage,
    timeout,
  });
  for (let i = 0; i < 4; i++) answers.push((await penalty.limit(`penalty-${run}`)).blockedForMs !== undefined);
  // The first policy's key is the fixed window's alone: it denies while the sliding window is empty.
  const windowOnly = createLimiter({
    store,
    policy: fixedWindow({ limit: 1, window: HOUR }),
    onStoreError: 'deny',
    onOutage,
    timeout,
  });
  const pair = createLimiter({
    store,
    policy: [fixedWindow({ limit: 1, window: HOUR }), slidingWindow({ limit: 5, window: HOUR })],
    onStoreError: 'deny',
    onOutage,
    timeout,
  });
  answers.push((await windowOnly.limit(`pair-${run}`)).allowed, (await pair.limit(`pair-${run}`)).allowed);
  const slots = createLimiter({
    store,
    policy: concurrency({ limit: 2, leaseMs: '1m' }),
    onStoreError: 'deny',
    onOutage,
    timeout,
  });
  const leases = [
    await slots.acquire(`slots-${run}`),
    await slots.acquire(`slots-${run}`),
    await slots.acquire(`slots-${run}`),
  ];
  answers.push(leases.map((lease) => lease.allowed));
  answers.push(
    await settled(leases[0]?.extend('2m') ?? Promise.resolve()),
    await settled(leases[0]?.release() ?? Promise.resolve()),
    (await slots.peek(`slots-${run}`)).remaining,
  );
  return answers;
}

/** What everyOperation answers when Redis lets every call through. */
const EVERY_OPERATION_ANSWERS = [
  ...algorithms.flatMap((a) => [a.name, 2, 1, 0, 0, true, true, 'done', true, true, [1, 1], 'done']),
  ...[false, false, true, true],
  ...[true, false],
  [true, true, false],
  true,
  true,
  1,
];

/** A client of each kind logged in as `user`, closed after this file's tests. */
function clientsOf(username: string, password: string): { name: string; client: () => RedisClient }[] {
  const connected = new Map<string, Connected>();
  before(async () => {
    for (const [name, connect] of Object.entries(clientKinds))
      connected.set(name, await connect(harness.server.port, { login: { username, password } }));
  });
  after(async () => {
    for (const { close } of connected.values()) await close();
  });
  return Object.keys(clientKinds).map((name) => ({
    name,
    client: () => {
      const ready = connected.get(name);
      assert.ok(ready, 'clients are used before their before() hook ran');
      return ready.client;
    },
  }));
}

const acl = await documentedAcl();

/** The clients that send CLIENT SETINFO when they connect to a server that has it (docs/reliability.md). */
const SENDS_CLIENT_SETINFO = new Set(['ioredis', 'node-redis', 'valkey-glide']);

describe(`ACL on ${testServer.name}: sluice under exactly the documented least-privilege user`, () => {
  before(async () => {
    await harness.redis.call('ACL', 'SETUSER', acl.user, ...acl.rules);
  });
  const clients = clientsOf(acl.user, acl.password);

  for (const { name, client } of clients) {
    it(`${name}: every algorithm and operation answers exactly, and Redis refuses nothing`, async () => {
      await harness.redis.call('ACL', 'LOG', 'RESET');
      const failures: StoreError[] = [];
      const answers = await everyOperation(redisStore(client()), failures);
      // A store failure first: it explains an answer that differs.
      assert.deepEqual(failures, []);
      assert.deepEqual(answers, EVERY_OPERATION_ANSWERS);
      assert.deepEqual(await refusals(harness.redis), []);
      const ttls = await keysWithTtl(harness.redis, 'sluice');
      assert.ok(ttls.size > 0);
      for (const [key, ttl] of ttls) assert.ok(ttl > 0, `${key} has PTTL ${ttl}`);
    });

    it(`${name}: bad input rejects with a typed error and writes nothing`, async () => {
      await harness.redis.call('ACL', 'LOG', 'RESET');
      const limiter = createLimiter({ store: redisStore(client()), policy: fixedWindow({ limit: 2, window: HOUR }) });
      const keysBefore = await harness.redis.dbsize();
      await assert.rejects(limiter.limit(''), InvalidArgumentError);
      await assert.rejects(limiter.limit('k', { cost: 0 }), InvalidArgumentError);
      await assert.rejects(limiter.refund('k', 1.5), InvalidArgumentError);
      assert.equal(await harness.redis.dbsize(), keysBefore);
      assert.deepEqual(await refusals(harness.redis), []);
    });
  }

  it('the sluice command (inspect, reset) runs under it, and Redis refuses nothing', async () => {
    await harness.redis.call('ACL', 'LOG', 'RESET');
    const url = `redis://${acl.user}:${acl.password}@127.0.0.1:${harness.server.port}`;
    const limiter = createLimiter({
      store: redisStore(clients[0]?.client() as RedisClient),
      policy: fixedWindow({ limit: 5, window: '1m' }),
    });
    await awayFromWindowEnd(60_000, 10_000);
    await limiter.limit('cli', { cost: 2 });
    const lines: string[] = [];
    const io = { out: (line: string) => lines.push(line), err: (line: string) => lines.push(line), env: {} };
    assert.equal(await runCli(['inspect', 'cli', '--policy', 'fixed-window:5/1m', '--redis', url, '--json'], io), 0);
    assert.equal((JSON.parse(lines[0] ?? '{}') as { decision: { remaining: number } }).decision.remaining, 3);
    assert.equal(await runCli(['reset', 'cli', '--policy', 'fixed-window:5/1m', '--redis', url], io), 0);
    assert.equal((await limiter.peek('cli')).remaining, 5);
    assert.deepEqual(await refusals(harness.redis), []);
  });

  it('connecting refuses nothing but CLIENT SETINFO (Redis 7.2 and later), which +client|setinfo grants', async () => {
    const login = { username: acl.user, password: acl.password };
    /** What Redis refused each kind of client, from its connecting to its first call. */
    const refusedOnConnect = async () => {
      const refused: Record<string, string[][]> = {};
      for (const [name, connect] of Object.entries(clientKinds)) {
        await harness.redis.call('ACL', 'LOG', 'RESET');
        const { client, close } = await connect(harness.server.port, { login });
        // A call after the client's own commands on connecting, so that Redis has answered them.
        await createLimiter({ store: redisStore(client), policy: fixedWindow({ limit: 1, window: HOUR }) }).peek('c');
        await close();
        refused[name] = await refusals(harness.redis);
      }
      return refused;
    };
    const refusing = (names: ReadonlySet<string>) =>
      Object.fromEntries(Object.keys(clientKinds).map((n) => [n, names.has(n) ? [['command', 'client|setinfo']] : []]));
    const [setinfo] = (await harness.redis.call('COMMAND', 'INFO', 'CLIENT|SETINFO')) as unknown[];
    if (setinfo === null) {
      assert.deepEqual(await refusedOnConnect(), refusing(new Set()));
      // Redis 7.0 has no CLIENT SETINFO, and refuses a rule naming it: the documented line leaves it out.
      await assert.rejects(harness.redis.call('ACL', 'SETUSER', acl.user, '+client|setinfo'), /Unknown command/);
      return;
    }
    try {
      assert.deepEqual(await refusedOnConnect(), refusing(SENDS_CLIENT_SETINFO));
      await harness.redis.call('ACL', 'SETUSER', acl.user, '+client|setinfo');
      assert.deepEqual(await refusedOnConnect(), refusing(new Set()));
    } finally {
      await harness.redis.call('ACL', 'SETUSER', acl.user, ...acl.rules);
    }
  });

  it('a missing permission: the failure policy answers, loud and named; calls return to Redis once it is granted', async () => {
    const rules = acl.rules.filter((r) => r !== '+time');
    await harness.redis.call('ACL', 'SETUSER', acl.user, ...rules);
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const limiter = createLimiter({
        store: redisStore(clients.find((c) => c.name === 'node-redis')?.client() as RedisClient),
        policy: fixedWindow({ limit: 5, window: HOUR }),
      });
      const denied = await limiter.limit('loud');
      assert.ok(denied.error instanceof StorePermissionError);
      assert.deepEqual(
        [denied.allowed, denied.reason, denied.error.missing, denied.error.name],
        [true, 'store-error', '+time', 'StorePermissionError'],
      );
      await assert.rejects(
        limiter.block('loud', '1m'),
        (error: unknown) => error instanceof StorePermissionError && error.missing === '+time',
      );
      await harness.redis.call('ACL', 'SETUSER', acl.user, ...acl.rules);
      const back = await limiter.limit('loud');
      assert.deepEqual([back.allowed, back.remaining, back.reason], [true, 4, undefined]);
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(
        warnings.map((w) => [
          (w as Error & { code?: string }).code,
          w.message.includes('the Redis user lacks +time') &&
            w.message.includes('docs/reliability.md#least-privilege-acl'),
        ]),
        [['SLUICE_STORE_FAILED', true]],
      );
    } finally {
      process.off('warning', onWarning);
      await harness.redis.call('ACL', 'SETUSER', acl.user, ...acl.rules);
    }
  });

  it('a refused key names the pattern to grant, its glob characters escaped; granting exactly that lets the call through', async () => {
    const store = redisStore(clients[0]?.client() as RedisClient);
    const limiter = createLimiter({
      store,
      prefix: 'a*[b]?\\c',
      policy: fixedWindow({ limit: 5, window: HOUR }),
      onStoreError: 'deny',
      onOutage: () => {},
    });
    const lookalike = createLimiter({
      store,
      prefix: 'aX[b]?\\c',
      policy: fixedWindow({ limit: 5, window: HOUR }),
      onStoreError: 'deny',
      onOutage: () => {},
    });
    try {
      const refused = await limiter.limit('k');
      assert.ok(refused.error instanceof StorePermissionError);
      assert.equal(refused.error.missing, '~a\\*\\[b\\]\\?\\\\c:*');
      await harness.redis.call('ACL', 'SETUSER', acl.user, refused.error.missing);
      assert.deepEqual([(await limiter.limit('k')).reason, (await limiter.limit('k')).remaining], [undefined, 3]);
      assert.equal((await lookalike.limit('k')).error?.constructor, StorePermissionError);
    } finally {
      await harness.redis.call('ACL', 'SETUSER', acl.user, ...acl.rules);
    }
  });

  for (const rule of acl.rules.filter((r) => r.startsWith('+') || r.startsWith('~'))) {
    it(`without ${rule}: Redis refuses it, and every failure is a StorePermissionError naming it`, async () => {
      await harness.redis.call('ACL', 'SETUSER', acl.user, ...acl.rules.filter((r) => r !== rule));
      try {
        for (const { name, client } of clients) {
          await harness.redis.call('ACL', 'LOG', 'RESET');
          const failures: StoreError[] = [];
          const answers = await everyOperation(redisStore(client()), failures);
          const refused = rule.startsWith('~') ? ['key', 'sluice:'] : ['command', rule.slice(1)];
          assert.equal(
            (await refusals(harness.redis)).some(
              ([reason, object]) => reason === refused[0] && object?.startsWith(refused[1] ?? ''),
            ),
            // A store over @upstash/redis never asks INFO.
            rule !== '+info' || checksEviction(name),
            `${name}: whether ACL LOG records a refusal of ${rule}`,
          );
          for (const failure of failures) {
            assert.ok(failure instanceof StorePermissionError, failure.message);
            assert.ok(failure.missing.split(' or ').includes(rule), `${failure.missing} does not name ${rule}`);
            assert.equal(failure.code, 'SLUICE_STORE_ERROR');
          }
          // INCRBY is the fixed window's fast path, caught in the script when refused, and INFO serves
          // only the eviction check, skipped when refused: only they fail nothing.
          if (rule === '+incrby' || rule === '+info')
            assert.deepEqual([failures.length, answers], [0, EVERY_OPERATION_ANSWERS]);
          else assert.ok(failures.length > 0, `no call failed without ${rule}`);
        }
      } finally {
        await harness.redis.call('ACL', 'SETUSER', acl.user, ...acl.rules);
      }
    });
  }
});
