import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { Redis } from 'ioredis';
import { freePort, startRedisServer, type RedisServer } from '../../src/cli/redis-server.js';
import { waitFor } from '../support/cluster.js';
import { healthClient } from '../support/health.js';
import { uniquePrefix } from '../support/redis.js';
import { descriptor, rlsClient, withConfig } from '../support/rls.js';
import { PATIENT, useServices, type Service } from '../support/service.js';

// `sluice serve --workers 2` as a process on a real Redis: every worker serves the same ports, the
// limit is exact across them, /metrics and health answer for the whole service, and the primary's
// signals reach every worker.

const services = useServices();
let redisServer: RedisServer;
let redis: Redis;
before(async () => {
  redisServer = await startRedisServer();
  redis = new Redis(redisServer.url);
});
after(async () => {
  await redis.quit();
  await redisServer.stop();
});

const ONE_RULE = (limit: number) =>
  `domain: edge\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: ${limit} }\n`;
const ASK_K = { domain: 'edge', descriptors: [descriptor(['k', 'v'])] };

/** The flags of 2 workers counting in the Redis at `url`. */
const twoOn = (dir: string, url: string, ...flags: string[]) => [
  ...['--config', dir, '--workers', '2', '--redis', url],
  ...flags,
];
const twoWorkers = (dir: string, ...flags: string[]) =>
  services.start(twoOn(dir, redisServer.url, '--prefix', uniquePrefix(), ...PATIENT, ...flags));

/** The worker processes of a service (the primary's children), by pid. */
async function workerPids(service: Service): Promise<number[]> {
  const pid = service.child.pid ?? assert.fail('no pid');
  const children = await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8');
  return children.trim().split(/\s+/).filter(Boolean).map(Number);
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const said = (service: Service, what: string | RegExp, count = 1) =>
  waitFor(
    `the service to say ${String(what)}`,
    () =>
      service.stderr.filter((line) => (typeof what === 'string' ? line.includes(what) : what.test(line))).length >=
      count,
  );

/** `calls` concurrent calls spread over `connections` connections of their own; resolves with how many were admitted. */
async function admitted(service: Service, calls: number, connections = 10): Promise<number> {
  const clients = Array.from({ length: connections }, () =>
    rlsClient(service.grpcPort, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }),
  );
  try {
    const answers = await Promise.all(
      Array.from({ length: calls }, (_, i) => (clients[i % connections] ?? assert.fail()).shouldRateLimit(ASK_K)),
    );
    return answers.filter((a) => a.overallCode === 'OK').length;
  } finally {
    clients.forEach((client) => client.close());
  }
}

describe('sluice serve --workers', () => {
  it('2 workers serve the same ports, admit exactly the limit together, and answer /metrics and health for both', async () => {
    await withConfig(ONE_RULE(300), async (dir) => {
      const service = await twoWorkers(dir);
      const pids = await workerPids(service);
      assert.equal(pids.length, 2);
      const ports = service.stderr.filter((line) => /^\[worker \d\] sluice serve: .* gRPC on /.test(line));
      assert.equal(ports.length, 2);
      assert.equal(ports[0]?.replace(/^\[worker \d\] /, ''), ports[1]?.replace(/^\[worker \d\] /, ''));
      assert.match(
        service.stderr.at(-1) ?? '',
        /^sluice serve: counting in Redis redis:\/\/127\.0\.0\.1:\d+; 2 workers$/,
      );

      assert.equal(await admitted(service, 1000), 300);
      // Each worker has its own Redis connection: both decided calls (their last command is the decision's script).
      const clients = (await redis.client('LIST')) as string;
      assert.equal(clients.split('\n').filter((line) => / cmd=evalsha /.test(line)).length, 2);

      const metrics = (await service.get('/metrics')).text;
      assert.match(
        metrics,
        /^sluice_serve_descriptors_total\{domain="edge",rule="k",code="OK",shadow_denied="false"\} 300$/m,
      );
      assert.match(
        metrics,
        /^sluice_serve_descriptors_total\{domain="edge",rule="k",code="OVER_LIMIT",shadow_denied="false"\} 700$/m,
      );
      // Histograms too, bucket by bucket: every decision was one `limit` operation, in one worker or the other.
      assert.match(metrics, /^sluice_operation_duration_seconds_count\{[^}]*sluice_operation="limit"\} 1000$/m);
      assert.match(
        metrics,
        /^sluice_operation_duration_seconds_bucket\{[^}]*sluice_operation="limit",le="\+Inf"\} 1000$/m,
      );
      assert.deepEqual(await service.get('/healthcheck'), { status: 200, text: 'OK\n' });
      const health = healthClient(service.grpcPort);
      try {
        assert.equal(await health.check(''), 'SERVING');
        assert.equal(await health.check('ratelimit'), 'SERVING');
      } finally {
        health.close();
      }

      assert.equal(await service.stop(), 0);
      assert.equal(service.stderr.filter((line) => /^\[worker \d\] sluice serve: stopped$/.test(line)).length, 2);
      assert.equal(service.stderr.at(-1), 'sluice serve: stopped');
      assert.deepEqual(pids.filter(alive), []);
    });
  });

  it('relays SIGHUP to every worker, and replaces a worker that dies', async () => {
    await withConfig(ONE_RULE(300), async (dir, write) => {
      const service = await twoWorkers(dir, '--no-watch');
      await write(ONE_RULE(400));
      service.child.kill('SIGHUP');
      await said(service, /^\[worker \d\] sluice serve: config reloaded: 1 domain, 1 rule from 1 file$/, 2);
      assert.equal(
        new Set(service.stderr.filter((l) => l.endsWith('config reloaded: 1 domain, 1 rule from 1 file'))).size,
        2,
      );
      assert.equal(await admitted(service, 20), 20);
      assert.equal((await service.grpc.shouldRateLimit(ASK_K)).statuses[0]?.currentLimit?.requestsPerUnit, 400);

      const [victim] = await workerPids(service);
      process.kill(victim ?? assert.fail(), 'SIGKILL');
      await said(service, /^sluice serve: worker \d \(pid \d+\) ended by SIGKILL; starting another$/);
      await said(service, /^sluice serve: worker 3 \(pid \d+\) serves in its place$/);
      assert.equal(await admitted(service, 20), 20);
      const pids = await workerPids(service);
      assert.equal(pids.length, 2);
      assert.ok(!pids.includes(victim ?? 0));
      assert.equal(await service.stop(), 0);
      assert.deepEqual(pids.filter(alive), []);
    });
  });

  it('answers NOT_SERVING for the whole service while the store fails under --on-store-error deny, and while draining', async () => {
    const own = await startRedisServer();
    await withConfig(ONE_RULE(300), async (dir) => {
      const service = await services.start(twoOn(dir, own.url, '--on-store-error', 'deny', '--timeout', '200ms'));
      const health = healthClient(service.grpcPort);
      try {
        assert.equal(await health.check(''), 'SERVING');
        await own.kill();
        await waitFor('/healthcheck to fail', async () => (await service.get('/healthcheck')).status === 500);
        assert.match((await service.get('/healthcheck')).text, /the store is failing, and the service denies then/);
        assert.equal(await health.check('envoy.service.ratelimit.v3.RateLimitService'), 'NOT_SERVING');
        await own.restart();
        await waitFor('/healthcheck to pass', async () => (await service.get('/healthcheck')).status === 200);

        const watch = health.watch('');
        await waitFor('the watch to say SERVING', () => watch.statuses.includes('SERVING'));
        service.child.kill('SIGTERM');
        const ended = await watch.ended;
        assert.deepEqual(watch.statuses, ['SERVING', 'NOT_SERVING']);
        assert.equal(ended.code, grpc.status.UNAVAILABLE);
        assert.equal(await service.exited, 0);
      } finally {
        health.close();
        await own.stop();
      }
    });
  });

  it('refuses more than one worker on the memory store, a count that is not one, a missing certificate before forking, the dashboard beside workers, and stops when a worker cannot start', async () => {
    await withConfig(ONE_RULE(300), async (dir) => {
      const memory = await services.runToExit(['--config', dir, '--workers', '2']);
      assert.equal(memory.code, 2);
      assert.match(
        memory.stderr.join('\n'),
        /--workers 2 \(2 processes\) needs --redis or --cluster: on the memory store each worker would admit the whole limit/,
      );
      const zero = await services.runToExit(['--config', dir, '--workers', '0', '--redis', redisServer.url]);
      assert.equal(zero.code, 2);
      assert.match(zero.stderr.join('\n'), /--workers must be auto or a number from 1 to 1024; got "0"/);
      const noCert = await services.runToExit(
        twoOn(dir, redisServer.url, '--tls-cert', `${dir}/missing.pem`, '--tls-key', `${dir}/missing-key.pem`),
      );
      assert.equal(noCert.code, 2);
      assert.match(noCert.stderr.join('\n'), /option "tls\.cert": ENOENT/);
      assert.ok(!noCert.stderr.some((line) => line.startsWith('[worker')));
      const dashboard = await services.runToExit(twoOn(dir, redisServer.url, '--dashboard'));
      assert.equal(dashboard.code, 2);
      assert.match(
        dashboard.stderr.join('\n'),
        /--dashboard shows one process's decisions: leave out --workers to use it/,
      );

      // A worker that cannot start stops the service, and says why.
      const nobody = `redis://127.0.0.1:${await freePort()}`;
      const noRedis = await services.runToExit(twoOn(dir, nobody));
      const said = noRedis.stderr.join('\n');
      assert.equal(noRedis.code, 1, said);
      assert.ok(
        noRedis.stderr.some((line) => line.startsWith(`sluice serve: cannot connect to Redis at ${nobody}`)),
        said,
      );
      assert.ok(
        noRedis.stderr.some((line) =>
          /^sluice serve: worker \d \(pid \d+\) ended with code 1 before it served; stopping$/.test(line),
        ),
        said,
      );
      assert.equal(noRedis.stderr.at(-1), 'sluice serve: stopped', said);
    });
  });
});
