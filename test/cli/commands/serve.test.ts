import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Cluster } from 'ioredis';
import { freePort, startRedisServer } from '../../../src/cli/redis-server.js';
import { waitFor } from '../../support/cluster.js';
import { startProxy } from '../../support/proxy.js';
import { uniquePrefix, useRedis } from '../../support/redis.js';
import { configDir, descriptor } from '../../support/rls.js';
import { PATIENT, useServices, type Service } from '../../support/service.js';

// `sluice serve` as operators run it: several processes on one Redis, stopped by SIGTERM, its
// configuration changed under load, a bad one refused at start. What it answers is in test/serve/service.test.ts.

const harness = useRedis({ cluster: true });
const services = useServices();

const ONE_RULE = (limit: number) =>
  `domain: edge\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: ${limit} }\n`;

const ASK_K = { domain: 'edge', descriptors: [descriptor(['k', 'v'])] };

/** 1,000 concurrent calls on one descriptor, spread over the services; resolves with how many were admitted. */
async function admittedOf(running: readonly Service[]): Promise<number> {
  const answers = await Promise.all(
    Array.from({ length: 1000 }, (_, i) => (running[i % running.length] ?? assert.fail()).grpc.shouldRateLimit(ASK_K)),
  );
  return answers.filter((a) => a.overallCode === 'OK').length;
}

const stopAll = (running: readonly Service[]) => Promise.all(running.map((s) => s.stop()));

/** Resolves once the service says it has `count` gRPC calls in flight. */
const inFlight = (service: Service, count: number) =>
  waitFor(`${count} calls to be in flight`, async () =>
    (await service.get('/metrics')).text.includes(`sluice_serve_in_flight{transport="grpc"} ${count}\n`),
  );

/**
 * Keeps `callers` calls going, each sending its next the moment the last is answered, until
 * `stop()`; records each answer, and the first failure.
 */
function underLoad<T>(call: () => Promise<T>, callers: number) {
  const answers: T[] = [];
  let failure: unknown;
  let stopping = false;
  const running = Array.from({ length: callers }, async () => {
    while (!stopping && failure === undefined) {
      try {
        answers.push(await call());
      } catch (error) {
        failure ??= error;
      }
    }
  });
  const failed = () => {
    if (failure !== undefined) throw new Error('a call under load failed', { cause: failure });
  };
  return {
    answers,
    /** Resolves once `check` holds; throws as soon as a call has failed. */
    until: (what: string, check: () => boolean) =>
      waitFor(what, () => {
        failed();
        return check();
      }),
    /** Stops sending; resolves with every answer once the last call is answered, or throws the first failure. */
    async stop(): Promise<T[]> {
      stopping = true;
      await Promise.all(running);
      failed();
      return answers;
    },
  };
}

describe('sluice serve as a process', () => {
  it('three processes on one Redis admit exactly the limit of 1,000 concurrent calls', async () => {
    const config = await configDir({ 'rules.yaml': ONE_RULE(300) });
    const prefix = uniquePrefix();
    try {
      const running = await Promise.all(
        [1, 2, 3].map(() =>
          services.start(['--config', config.dir, '--redis', harness.server.url, '--prefix', prefix, ...PATIENT]),
        ),
      );
      assert.equal(await admittedOf(running), 300);
      assert.deepEqual(await stopAll(running), [0, 0, 0]);
    } finally {
      await config.remove();
    }
  });

  it('three processes on a 3-master Redis Cluster admit exactly the limit of 1,000 concurrent calls', async () => {
    const cluster = harness.cases.find((c) => c.name === 'redis cluster (ioredis)')?.redis as Cluster;
    const urls = cluster.nodes('master').map((node) => `redis://127.0.0.1:${node.options.port}`);
    const config = await configDir({ 'rules.yaml': ONE_RULE(300) });
    const prefix = uniquePrefix();
    try {
      const running = await Promise.all(
        [1, 2, 3].map(() =>
          services.start(['--config', config.dir, '--cluster', urls.join(','), '--prefix', prefix, ...PATIENT]),
        ),
      );
      assert.ok(
        running[0]?.stderr.some((line) =>
          line.startsWith('sluice serve: counting in Redis Cluster redis://127.0.0.1:'),
        ),
      );
      assert.equal(await admittedOf(running), 300);
      assert.deepEqual(await stopAll(running), [0, 0, 0]);
    } finally {
      await config.remove();
    }
  });

  it('on SIGTERM answers the calls in flight, then exits 0', async () => {
    const redis = await startRedisServer();
    const proxy = await startProxy(redis.port);
    const config = await configDir({ 'rules.yaml': ONE_RULE(5) });
    try {
      // A timeout long enough that the held call is answered by Redis, not by the failure policy.
      const service = await services.start([
        '--config',
        config.dir,
        '--redis',
        `redis://127.0.0.1:${proxy.port}`,
        ...PATIENT,
      ]);
      assert.equal((await service.grpc.shouldRateLimit(ASK_K)).overallCode, 'OK');
      proxy.blackHole();
      const held = service.grpc.shouldRateLimit(ASK_K);
      await inFlight(service, 1);
      service.child.kill('SIGTERM');
      await waitFor('the service to stop taking calls', () =>
        service.stderr.some((line) => line.includes('SIGTERM: answering the calls in flight')),
      );
      proxy.heal();
      const answer = await held;
      assert.deepEqual([answer.overallCode, answer.statuses[0]?.limitRemaining], ['OK', 3]);
      assert.equal(await service.exited, 0);
      assert.equal(service.stderr.at(-1), 'sluice serve: stopped');
    } finally {
      await proxy.stop();
      await redis.stop();
      await config.remove();
    }
  });

  it('takes changes to its configuration under load, failing no call; refuses a bad one and serves on', async () => {
    const redis = await startRedisServer();
    const proxy = await startProxy(redis.port);
    const config = await configDir({ 'rules.yaml': ONE_RULE(100_000) });
    try {
      // With 'deny', a call the store failed would be answered OVER_LIMIT: every answer must be OK.
      const service = await services.start([
        '--config',
        config.dir,
        '--redis',
        `redis://127.0.0.1:${proxy.port}`,
        '--on-store-error',
        'deny',
        ...PATIENT,
      ]);
      const load = underLoad(async () => {
        const answer = await service.grpc.shouldRateLimit(ASK_K);
        assert.equal(answer.overallCode, 'OK');
        return answer.statuses[0]?.currentLimit?.requestsPerUnit;
      }, 16);
      const serving = (limit: number) =>
        load.until(`the limit of ${limit} to be served`, () => load.answers.at(-1) === limit);
      const said = (what: string, count: number) =>
        load.until(`the service to say ${what}`, () => service.stderr.filter((l) => l.includes(what)).length >= count);
      await serving(100_000);

      // Every caller's call held inside the service, waiting for Redis, while the change takes effect.
      proxy.blackHole();
      await inFlight(service, 16);
      await config.write('rules.yaml', ONE_RULE(200_000));
      await said('config reloaded', 1);
      proxy.heal();
      await serving(200_000);

      await config.write('rules.yaml', ONE_RULE(300_000).replace('hour', 'fortnight'));
      await said('the change is refused', 1);
      const refusedAt = load.answers.length;
      await load.until('more calls to be answered', () => load.answers.length >= refusedAt + 64);
      assert.deepEqual(new Set(load.answers.slice(refusedAt)), new Set([200_000]));

      await config.write('rules.yaml', ONE_RULE(300_000));
      await serving(300_000);
      // A call keeps the rules it started with: the held calls were answered by the first.
      assert.deepEqual([...new Set(await load.stop())], [100_000, 200_000, 300_000]);
      assert.deepEqual(
        service.stderr.filter((line) => / config |config reloaded/.test(line)),
        [
          'sluice serve: config reloaded: 1 domain, 1 rule from 1 file',
          `sluice: config ${config.dir}/rules.yaml at descriptors[0].rate_limit.unit: must be second, minute, hour, day, week, month or year (or give a "window" such as 5m); got "fortnight"; the change is refused and the previous config keeps serving`,
          'sluice serve: config reloaded: 1 domain, 1 rule from 1 file',
        ],
      );
      assert.equal(await service.stop(), 0);
    } finally {
      await proxy.stop();
      await redis.stop();
      await config.remove();
    }
  });

  it('says when it counts in memory, and decides there', async () => {
    const config = await configDir({ 'rules.yaml': ONE_RULE(2) });
    try {
      const service = await services.start(['--config', config.dir]);
      assert.ok(
        service.stderr.some((line) =>
          line.startsWith(
            "sluice serve: counting in this process's memory (no --redis, --cluster or REDIS_URL), so run one instance only",
          ),
        ),
        service.stderr.join('\n'),
      );
      const answers = [];
      for (let i = 0; i < 3; i++) answers.push((await service.grpc.shouldRateLimit(ASK_K)).overallCode);
      assert.deepEqual(answers, ['OK', 'OK', 'OVER_LIMIT']);
      assert.equal(await service.stop(), 0);
    } finally {
      await config.remove();
    }
  });
});

const KEY_K = 'domain: d\ndescriptors:\n  - key: k\n';
const RATE_LIMIT = (fields: string) => `${KEY_K}    rate_limit: { ${fields} }\n`;

/** Each bad configuration of the issue, and more: its files, and the one line the service says (`<dir>`: their directory). */
const BAD_CONFIGS: { what: string; files: Record<string, string>; says: string }[] = [
  {
    what: 'bad YAML',
    files: { 'rules.yaml': 'domain: [x\n' },
    says: 'rules.yaml at line 2, column 1: bad YAML: Flow sequence in block collection must be sufficiently indented and end with a ]',
  },
  {
    what: 'an unknown field',
    files: { 'rules.yaml': `${KEY_K}    rate_limt: { unit: second, requests_per_unit: 1 }\n` },
    says: 'rules.yaml at descriptors[0].rate_limt: unknown field "rate_limt"; the fields here are key, value, rate_limit, rate_limits, shadow_mode, detailed_metric, value_to_metric, share_threshold, metadata, descriptors',
  },
  {
    what: "envoyproxy/ratelimit's quota_mode, which sluice does not enforce",
    files: { 'rules.yaml': `${KEY_K}    quota_mode: true\n` },
    says: 'rules.yaml at descriptors[0].quota_mode: is not supported: sluice answers OVER_LIMIT for any descriptor over its limit (remove it, or keep this rule on envoyproxy/ratelimit)',
  },
  {
    what: 'an empty domain',
    files: { 'rules.yaml': 'domain: ""\ndescriptors: []\n' },
    says: 'rules.yaml at domain: must be a non-empty string; got ""',
  },
  {
    what: 'a duplicate domain',
    files: { 'rules.yaml': 'domain: d\n---\ndomain: d\n' },
    says: 'rules.yaml at domain: duplicate domain in one file (several files may share a domain; one file names it once); got "d"',
  },
  {
    what: 'an empty key',
    files: { 'rules.yaml': 'domain: d\ndescriptors:\n  - key: ""\n' },
    says: 'rules.yaml at descriptors[0].key: must be a non-empty string; got ""',
  },
  {
    what: 'a list for a key',
    files: { 'rules.yaml': 'domain: d\ndescriptors:\n  - key: [12]\n' },
    says: 'rules.yaml at descriptors[0].key: must be a non-empty string; got a list',
  },
  {
    what: 'a duplicate key at one level',
    files: { 'rules.yaml': `${KEY_K}    value: v\n  - key: k\n    value: v\n` },
    says: 'rules.yaml at descriptors[1]: duplicate descriptor: key "k" with value "v" is already defined',
  },
  {
    what: 'a duplicate key at a nested level',
    files: { 'rules.yaml': `${KEY_K}    descriptors:\n      - key: j\n      - key: j\n` },
    says: 'rules.yaml at descriptors[0].descriptors[1]: duplicate descriptor: key "j" is already defined',
  },
  {
    what: 'a duplicate key in two files of one domain',
    files: {
      'a.yaml': RATE_LIMIT('unit: hour, requests_per_unit: 1'),
      'b.yaml': RATE_LIMIT('unit: day, requests_per_unit: 9'),
    },
    says: 'b.yaml at descriptors[0]: duplicate descriptor: key "k" is already defined in <dir>/a.yaml',
  },
  {
    what: 'a bad unit',
    files: {
      'rules.yaml': `${KEY_K}    descriptors:\n      - key: j\n        rate_limit: { unit: fortnight, requests_per_unit: 1 }\n`,
    },
    says: 'rules.yaml at descriptors[0].descriptors[0].rate_limit.unit: must be second, minute, hour, day, week, month or year (or give a "window" such as 5m); got "fortnight"',
  },
  {
    what: 'a limit of 0 among several',
    files: {
      'rules.yaml': `${KEY_K}    rate_limits:\n      - { unit: hour, requests_per_unit: 5 }\n      - { unit: second, requests_per_unit: 0 }\n`,
    },
    says: 'rules.yaml at descriptors[0].rate_limits[1].requests_per_unit: a limit of 0 denies every request: give it as the descriptor\'s only "rate_limit"; got 0',
  },
  {
    what: 'a burst on a limit of 0',
    files: { 'rules.yaml': RATE_LIMIT('algorithm: token_bucket, unit: second, requests_per_unit: 0, burst: 3') },
    says: 'rules.yaml at descriptors[0].rate_limit.burst: "requests_per_unit: 0" denies every request, so takes no burst; got 3',
  },
  {
    what: 'share_threshold on a value without a wildcard',
    files: {
      'rules.yaml': `${KEY_K}    value: v\n    share_threshold: true\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n`,
    },
    says: 'rules.yaml at descriptors[0].share_threshold: applies to a wildcard value (one holding "*") only; got true',
  },
  {
    what: 'metadata on a descriptor without a rate limit',
    files: { 'rules.yaml': `${KEY_K}    metadata: { team: a }\n` },
    says: 'rules.yaml at descriptors[0].metadata: is returned for a rule that decides, so needs a "rate_limit" beside it',
  },
  {
    what: 'metadata a Struct cannot hold',
    files: {
      'rules.yaml': `${KEY_K}    metadata: { weight: .inf }\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n`,
    },
    says: 'rules.yaml at descriptors[0].metadata.weight: must be a finite number; got Infinity',
  },
  {
    what: 'metadata while responses carry no dynamic_metadata',
    files: {
      'rules.yaml': `${KEY_K}    metadata: { team: a }\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n`,
    },
    says: 'rules.yaml at descriptors[0].metadata: is returned in dynamic_metadata, which this service sends only with --response-dynamic-metadata (createServer: responseDynamicMetadata: true), as envoyproxy/ratelimit does with RESPONSE_DYNAMIC_METADATA',
  },
  {
    what: 'unlimited with a unit',
    files: { 'rules.yaml': RATE_LIMIT('unlimited: true, unit: second') },
    says: 'rules.yaml at descriptors[0].rate_limit.unit: "unlimited: true" takes no unit; got "second"',
  },
  {
    what: 'replaces naming itself',
    files: { 'rules.yaml': RATE_LIMIT('unit: second, requests_per_unit: 1, name: n, replaces: [{ name: n }]') },
    says: 'rules.yaml at descriptors[0].rate_limit.replaces: a rate limit cannot replace itself ("n")',
  },
  {
    what: 'replaces naming nothing',
    files: { 'rules.yaml': RATE_LIMIT('unit: second, requests_per_unit: 1, replaces: [{ name: ghost }]') },
    says: 'rules.yaml at descriptors[0].rate_limit.replaces: names no rate limit of domain "d"; got "ghost"',
  },
  {
    what: 'a list where a map belongs',
    files: { 'rules.yaml': `${KEY_K}    rate_limit: [1, 2]\n` },
    says: 'rules.yaml at descriptors[0].rate_limit: must be a map; got a list',
  },
  {
    what: 'a map where a list belongs',
    files: { 'rules.yaml': 'domain: d\ndescriptors:\n  key: k\n' },
    says: 'rules.yaml at descriptors: must be a list; got a map',
  },
  {
    what: 'an unknown algorithm',
    files: { 'rules.yaml': RATE_LIMIT('algorithm: leaky, unit: second, requests_per_unit: 1') },
    says: 'rules.yaml at descriptors[0].rate_limit.algorithm: must be one of fixed_window, sliding_log, sliding_window, token_bucket, gcra; got "leaky"',
  },
  {
    what: 'a lease on sliding_log',
    files: {
      'rules.yaml': RATE_LIMIT(
        'algorithm: sliding_log, unit: second, requests_per_unit: 10, lease: { units: 2, ms: 1s }',
      ),
    },
    says: 'rules.yaml at descriptors[0].rate_limit.lease: sliding_log takes no lease: the log counts each unit for one window from the ms it was charged, so a leased unit used later would leave the log before the request it admitted leaves the window (sliding_window takes one)',
  },
  {
    what: 'a lease of more units than the limit',
    files: { 'rules.yaml': RATE_LIMIT('unit: second, requests_per_unit: 10, lease: { units: 11, ms: 1s }') },
    says: 'rules.yaml at descriptors[0].rate_limit.lease.units: must be a whole number from 1 to 10, the most this limit admits at once; got 11',
  },
  {
    what: 'a lease of a bad duration',
    files: { 'rules.yaml': RATE_LIMIT('unit: second, requests_per_unit: 10, lease: { units: 2, ms: soon }') },
    says: `rules.yaml at descriptors[0].rate_limit.lease.ms: must be a duration such as '90s', '5m', '1h' (whole ms from 1 ms to 366 days); got "soon"`,
  },
  {
    what: 'a lease with an unknown field',
    files: {
      'rules.yaml': RATE_LIMIT('unit: second, requests_per_unit: 10, lease: { units: 2, ms: 1s, adaptive: true }'),
    },
    says: 'rules.yaml at descriptors[0].rate_limit.lease.adaptive: unknown field "adaptive"; the fields here are units, ms',
  },
  {
    what: 'a lease in a list of limits',
    files: {
      'rules.yaml': `${KEY_K}    rate_limits:\n      - { unit: hour, requests_per_unit: 5, lease: { units: 2, ms: 1s } }\n`,
    },
    says: 'rules.yaml at descriptors[0].rate_limits[0].lease: a lease takes one limit\'s quota ahead, and several limits would each need their own: give it on a descriptor whose one limit is its "rate_limit"',
  },
  {
    what: 'a lease on a limit of 0',
    files: { 'rules.yaml': RATE_LIMIT('unit: second, requests_per_unit: 0, lease: { units: 1, ms: 1s }') },
    says: 'rules.yaml at descriptors[0].rate_limit.lease: "requests_per_unit: 0" denies every request, so takes no lease; got a map',
  },
  {
    what: 'a lease on an unlimited rule',
    files: { 'rules.yaml': RATE_LIMIT('unlimited: true, lease: { units: 1, ms: 1s }') },
    says: 'rules.yaml at descriptors[0].rate_limit.lease: "unlimited: true" takes no lease; got a map',
  },
  {
    what: 'a bad window',
    files: { 'rules.yaml': RATE_LIMIT('window: 5 minutes, requests_per_unit: 1') },
    says: `rules.yaml at descriptors[0].rate_limit.window: must be a duration such as '90s', '5m', '1h' (whole ms from 1 ms to 366 days); got "5 minutes"`,
  },
];

describe('sluice serve refuses a bad configuration at start', () => {
  it('with exit code 2 and one line naming the file, the place inside it and the problem', async () => {
    // All at once: each process refuses before it listens, so the batch takes about as long as one.
    const refusals = await Promise.all(
      BAD_CONFIGS.map(async ({ what, files }) => {
        const config = await configDir(files);
        try {
          const { code, stderr } = await services.runToExit(['--config', config.dir]);
          return { what, code, stderr: stderr.map((line) => line.replaceAll(config.dir, '<dir>')) };
        } finally {
          await config.remove();
        }
      }),
    );
    assert.deepEqual(
      refusals,
      BAD_CONFIGS.map(({ what, says }) => ({ what, code: 2, stderr: [`sluice: config <dir>/${says}`] })),
    );
  });

  it('before it asks Redis: a bad configuration is named while Redis is down', async () => {
    const config = await configDir({ 'rules.yaml': RATE_LIMIT('window: 5 minutes, requests_per_unit: 1') });
    try {
      const nobody = `redis://127.0.0.1:${await freePort()}`;
      const { code, stderr } = await services.runToExit(['--config', config.dir, '--redis', nobody]);
      assert.deepEqual(
        { code, stderr: stderr.map((line) => line.replaceAll(config.dir, '<dir>')) },
        {
          code: 2,
          stderr: [
            `sluice: config <dir>/rules.yaml at descriptors[0].rate_limit.window: must be a duration such as '90s', '5m', '1h' (whole ms from 1 ms to 366 days); got "5 minutes"`,
          ],
        },
      );
    } finally {
      await config.remove();
    }
  });

  it('with exit code 2 for a configuration that cannot be read, or none', async () => {
    const [missing, none] = await Promise.all([
      services.runToExit(['--config', 'nowhere/rules.yaml']),
      services.runToExit([]),
    ]);
    assert.deepEqual(missing, { code: 2, stderr: ['sluice: config nowhere/rules.yaml: cannot read it (ENOENT)'] });
    assert.equal(none.code, 2);
    assert.match(none.stderr.join('\n'), /missing --config <file or directory>/);
  });
});
