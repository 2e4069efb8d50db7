import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { startRedisServer } from '../../src/cli/redis-server.js';
import { waitFor } from '../support/cluster.js';
import { healthClient, type Watching } from '../support/health.js';
import { startProxy } from '../support/proxy.js';
import { configDir, descriptor } from '../support/rls.js';
import { PATIENT, useServices, type Service } from '../support/service.js';

// grpc.health.v1.Health on sluice serve's gRPC port, asked by a @grpc/grpc-js client of the built
// command as a process, beside GET /healthcheck on its HTTP port.

const services = useServices();
const configs: Awaited<ReturnType<typeof configDir>>[] = [];
after(() => Promise.all(configs.map((config) => config.remove())));

const RULES = 'domain: edge\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 100 }\n';
const RATE_LIMIT_SERVICE = 'envoy.service.ratelimit.v3.RateLimitService';
const ASK = { domain: 'edge', descriptors: [descriptor(['k', 'v'])] };

async function serve(flags: readonly string[]): Promise<Service> {
  const config = await configDir({ 'rules.yaml': RULES });
  configs.push(config);
  return services.start(['--config', config.dir, '--no-watch', ...flags]);
}

/** Resolves once `watching` has received `count` statuses. */
const received = (watching: Watching, count: number) =>
  waitFor(
    `${count} statuses from Watch (so far: ${watching.statuses.join(', ')})`,
    () => watching.statuses.length >= count,
  );

describe('grpc.health.v1.Health on sluice serve', () => {
  it('answers Check and Watch for the whole server and each service name; an unknown one is not found', async () => {
    const { grpcPort } = await serve([]);
    const health = healthClient(grpcPort);
    try {
      // '' is the whole server; 'ratelimit' is envoyproxy/ratelimit's name for its service.
      for (const service of ['', RATE_LIMIT_SERVICE, 'ratelimit']) assert.equal(await health.check(service), 'SERVING');
      await assert.rejects(health.check('grpc.health.v1.Nope'), {
        code: grpc.status.NOT_FOUND,
        details: 'unknown service',
      });
      const whole = health.watch('');
      const unknown = health.watch('grpc.health.v1.Nope');
      await received(whole, 1);
      await received(unknown, 1);
      assert.deepEqual([whole.statuses, unknown.statuses], [['SERVING'], ['SERVICE_UNKNOWN']]);
      // A Watch stays open, the unknown one too, until the client ends it.
      whole.cancel();
      unknown.cancel();
      assert.deepEqual(
        (await Promise.all([whole.ended, unknown.ended])).map((s) => s.code),
        [grpc.status.CANCELLED, grpc.status.CANCELLED],
      );
    } finally {
      health.close();
    }
  });

  it('says NOT_SERVING while the store fails under --on-store-error deny, and SERVING once it is back', async () => {
    const redis = await startRedisServer();
    try {
      // A generous timeout: a loaded machine's slow reply must not read as a failure.
      const flags = ['--redis', redis.url, '--timeout', '30s'];
      const denying = await serve([...flags, '--on-store-error', 'deny']);
      const allowing = await serve(flags);
      const health = healthClient(denying.grpcPort);
      const allowingHealth = healthClient(allowing.grpcPort);
      try {
        const watching = health.watch(RATE_LIMIT_SERVICE);
        await received(watching, 1);
        assert.equal(await health.check(''), 'SERVING');
        await redis.kill();
        assert.deepEqual(
          [await health.check(''), await health.check(RATE_LIMIT_SERVICE), await denying.get('/healthcheck')],
          ['NOT_SERVING', 'NOT_SERVING', { status: 500, text: 'the store is failing, and the service denies then\n' }],
        );
        await received(watching, 2);
        // Failing open, the other service still decides, so it serves.
        assert.deepEqual(
          [await allowingHealth.check(''), (await allowing.get('/healthcheck')).status],
          ['SERVING', 200],
        );
        await redis.restart();
        await waitFor('the service to serve again', async () => (await health.check('')) === 'SERVING');
        await received(watching, 3);
        assert.deepEqual(watching.statuses, ['SERVING', 'NOT_SERVING', 'SERVING']);
        assert.deepEqual(await denying.get('/healthcheck'), { status: 200, text: 'OK\n' });
        watching.cancel();
      } finally {
        health.close();
        allowingHealth.close();
      }
    } finally {
      await redis.stop();
    }
  });

  it('says NOT_SERVING from SIGTERM on, while the calls in flight are answered', async () => {
    const redis = await startRedisServer();
    const proxy = await startProxy(redis.port);
    try {
      const service = await serve(['--redis', `redis://127.0.0.1:${proxy.port}`, ...PATIENT]);
      const health = healthClient(service.grpcPort);
      try {
        const watching = health.watch('');
        await received(watching, 1);
        assert.equal((await service.grpc.shouldRateLimit(ASK)).overallCode, 'OK');
        proxy.blackHole();
        const held = service.grpc.shouldRateLimit(ASK);
        await waitFor('the call to be in flight', async () =>
          (await service.get('/metrics')).text.includes('sluice_serve_in_flight{transport="grpc"} 1\n'),
        );
        service.child.kill('SIGTERM');
        // Watchers are told, and their calls end; HTTP answers while gRPC's calls are answered.
        const ended = await watching.ended;
        assert.deepEqual(
          [watching.statuses, ended.code, ended.details],
          [['SERVING', 'NOT_SERVING'], grpc.status.UNAVAILABLE, 'the service is stopping'],
        );
        assert.deepEqual(await service.get('/healthcheck'), { status: 500, text: 'the service is stopping\n' });
        proxy.heal();
        assert.equal((await held).overallCode, 'OK');
        assert.equal(await service.exited, 0);
      } finally {
        health.close();
      }
    } finally {
      await proxy.stop();
      await redis.stop();
    }
  });
});
