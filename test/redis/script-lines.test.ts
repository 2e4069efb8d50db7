import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { CHECKED_IN, fileOf, parseName } from '../../lua/scripts.js';
import type { RedisServer } from '../../src/cli/redis-server.js';
import { callKeys } from '../../src/core/keys.js';
import { scriptArgs, scriptFor } from '../../src/engine/driver.js';
import {
  concurrency,
  fixedWindow,
  gcra,
  redisStore,
  slidingLog,
  slidingWindow,
  tokenBucket,
  type Policy,
} from '../../src/index.js';
import { uniquePrefix, WITHOUT_PEXPIRETIME } from '../support/redis.js';
import { enginePolicy } from '../../src/engine/algorithm.js';
import { startTestServer, testServer } from '../support/servers.js';

/** A policy of each algorithm, by the name its policy reports: one request admitted, the next denied. */
const POLICIES: ReadonlyMap<string, Policy> = new Map(
  [
    fixedWindow({ limit: 1, window: '1h' }),
    slidingLog({ limit: 1, window: '1h' }),
    slidingWindow({ limit: 1, window: '1h' }),
    tokenBucket({ capacity: 1, refillPerSecond: 1 / 3600 }),
    gcra({ limit: 1, period: '1h' }),
    concurrency({ limit: 1, leaseMs: '1h' }),
  ].map((policy) => [policy.algorithm, policy]),
);

const USER = 'lines';
const PASSWORD = 'lines-password';

/** A Redis server, an admin client, and a client logged in as USER, whose rules each test sets. */
function useServer(args: readonly string[] = []) {
  let server: RedisServer | undefined;
  let admin: Redis | undefined;
  let user: Redis | undefined;
  before(async () => {
    server = await startTestServer(args);
    admin = new Redis(server.url);
    await admin.call('ACL', 'SETUSER', USER, 'on', `>${PASSWORD}`, '~*', '+@all');
    user = new Redis(server.url, { username: USER, password: PASSWORD });
  });
  after(async () => {
    await user?.quit();
    await admin?.quit();
    await server?.stop();
  });
  return {
    admin: () => admin as Redis,
    user: () => user as Redis,
  };
}

/** The commands a piece of Lua calls, each once. */
function calledCommands(lua: string): string[] {
  return [...new Set(Array.from(lua.matchAll(/redis\.p?call\('(\w+)'/g), ([, name = '']) => name))];
}

/** The script's SHA and line that a Redis error names, from a StoreError or anything it wraps. */
function scriptLine(error: unknown): { sha: string; line: number } | undefined {
  for (let e = error; e instanceof Error; e = e.cause) {
    const found = /script: ([0-9a-f]{40}), on @user_script:(\d+)\./.exec(e.message);
    if (found) return { sha: found[1] as string, line: Number(found[2]) };
  }
  return undefined;
}

const newer = useServer();
const older = useServer(WITHOUT_PEXPIRETIME);

describe(`the line a ${testServer.name} error names is the line of the checked-in script`, () => {
  for (const name of CHECKED_IN) {
    const { algorithms, batch, withoutPexpiretime } = parseName(name);
    it(`lua/${fileOf(name)}: each command refused, the error names the script and a line calling it`, async () => {
      const server = withoutPexpiretime ? older : newer;
      const file = readFileSync(new URL(`../../lua/${fileOf(name)}`, import.meta.url), 'utf8');
      const lines = file.split('\n');
      const sha = (await server.admin().script('LOAD', file)) as string;
      const policies = algorithms.map((algorithm) => enginePolicy(POLICIES.get(algorithm) as Policy));
      const script = scriptFor(policies.map((policy) => policy.kind));
      const args = scriptArgs({
        op: 'limit',
        cost: 1,
        target: 0,
        ms: 0,
        penalty: { strikes: 0, blockMs: 0 },
        policies,
      });
      const mapped = new Map<string, number>();
      for (const command of calledCommands(file)) {
        // PEXPIRETIME is asked first by a script of its own, which the store sends to learn the server's form.
        if (command === 'PEXPIRETIME') continue;
        await server.admin().call('ACL', 'SETUSER', USER, 'reset', 'on', `>${PASSWORD}`, '~*', '+@all', `-${command}`);
        const store = redisStore(server.user());
        const prefix = uniquePrefix();
        // Twice: the second call finds the state the first wrote, and is denied. A batch: two keys in one tick.
        const calls = batch
          ? () => Promise.all(['a', 'b'].map((key) => store.run(script, callKeys(prefix, key, policies), args)))
          : () => store.run(script, callKeys(prefix, 'k', policies), args);
        for (let i = 0; i < 2; i++) {
          const named = await calls().then(
            () => undefined,
            (error: unknown) => scriptLine(error),
          );
          if (named === undefined) continue;
          assert.equal(named.sha, sha, `refusing ${command}, Redis names another script than lua/${fileOf(name)}`);
          assert.ok(
            lines[named.line - 1]?.includes(`call('${command}'`),
            `refusing ${command}, Redis names line ${named.line}, which is ${JSON.stringify(lines[named.line - 1])}`,
          );
          mapped.set(command, named.line);
          break;
        }
      }
      await server.admin().call('ACL', 'SETUSER', USER, 'reset', 'on', `>${PASSWORD}`, '~*', '+@all');
      // A line in each part: the driver (the block key's GET), the algorithms, and what runs last
      // (TIME). A batch catches each request's error, and Redis names a line only for an error that
      // ends the script: there, only TIME's.
      const lineOf = (text: string, from = 0) => lines.indexOf(text, from) + 1;
      const driverEnd = lineOf('end', lineOf('local function decideCall(block, KEYS, k, ARGV, now, out, at)'));
      const timeLine = lineOf("local time = redis.call('TIME')");
      assert.equal(mapped.get('TIME'), timeLine);
      if (!batch) {
        assert.ok((mapped.get('GET') ?? Infinity) < driverEnd, `mapped ${JSON.stringify([...mapped])}`);
        assert.ok(
          [...mapped.values()].some((line) => line > driverEnd && line < timeLine),
          `no line of the algorithms was mapped: ${JSON.stringify([...mapped])}`,
        );
      }
    });
  }
});
