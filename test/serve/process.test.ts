import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { after, describe, it } from 'node:test';
import type { Cluster } from 'ioredis';
import { startRedisServer } from '../../src/cli/redis-server.js';
import { waitFor } from '../support/cluster.js';
import { startProxy } from '../support/proxy.js';
import { uniquePrefix, useRedis } from '../support/redis.js';
import { configDir, descriptor, rlsClient } from '../support/rls.js';

// The built command, as users run it (npm test builds first).
const CLI = 'dist/esm/cli/main.js';

const harness = useRedis({ cluster: true });

interface Service {
  readonly child: ChildProcess;
  readonly grpcPort: number;
  readonly httpPort: number;
  readonly stderr: string[];
  readonly exited: Promise<number | null>;
}

const children: ChildProcess[] = [];
after(() => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
});

/** Spawns `sluice serve` and resolves once it listens (or rejects with its stderr if it exits first). */
async function startService(args: readonly string[]): Promise<Service> {
  const child = spawn(
    process.execPath,
    [CLI, 'serve', '--grpc-port', '0', '--http-port', '0', '--host', '127.0.0.1', ...args],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  children.push(child);
  const stderr: string[] = [];
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  let buffered = '';
  // The service's last line at start says where it counts; an earlier one gives the ports.
  let ports: { grpcPort: number; httpPort: number } | undefined;
  const listening = new Promise<{ grpcPort: number; httpPort: number }>((resolve, reject) => {
    child.stderr?.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) {
        stderr.push(line);
        const bound = /gRPC on 127\.0\.0\.1:(\d+), HTTP on 127\.0\.0\.1:(\d+)$/.exec(line);
        if (bound) ports = { grpcPort: Number(bound[1]), httpPort: Number(bound[2]) };
        if (ports && line.startsWith('sluice serve: counting in ')) resolve(ports);
      }
    });
    void exited.then((code) => reject(new Error(`sluice serve exited with ${code}: ${stderr.join('\n')}`)));
  });
  return { child, stderr, exited, ...(await listening) };
}

/** Runs `sluice serve` to its end: exit code and stderr lines. */
async function runToExit(args: readonly string[]): Promise<{ code: number | null; stderr: string[] }> {
  const child = spawn(
    process.execPath,
    [CLI, 'serve', '--grpc-port', '0', '--http-port', '0', '--host', '127.0.0.1', ...args],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  children.push(child);
  let text = '';
  child.stderr.on('data', (chunk: Buffer) => (text += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stderr: text.split('\n').filter(Boolean) };
}

// On a busy test machine a call can wait past the default 1 s; answered by the failure policy, it
// would not be counted. These tests are about exact counts, so they wait for Redis.
const PATIENT = ['--timeout', '60s'];

const ONE_RULE = (limit: number) =>
  `domain: edge\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: ${limit} }\n`;

/** 1,000 concurrent calls on one descriptor, spread over the services; resolves with how many were admitted. */
async function admittedOf(services: readonly Service[]): Promise<number> {
  const clients = services.map((s) => rlsClient(s.grpcPort));
  try {
    const answers = await Promise.all(
      Array.from({ length: 1000 }, (_, i) =>
        (clients[i % clients.length] ?? assert.fail()).shouldRateLimit({
          domain: 'edge',
          descriptors: [descriptor(['k', 'v'])],
        }),
      ),
    );
    return answers.filter((a) => a.overallCode === 'OK').length;
  } finally {
    clients.forEach((c) => c.close());
  }
}

async function stopAll(services: readonly Service[]): Promise<(number | null)[]> {
  services.forEach((s) => s.child.kill('SIGTERM'));
  return Promise.all(services.map((s) => s.exited));
}

describe('sluice serve as a process', () => {
  it('three processes on one Redis admit exactly the limit of 1,000 concurrent calls', async () => {
    const config = await configDir({ 'rules.yaml': ONE_RULE(300) });
    const prefix = uniquePrefix();
    try {
      const services = await Promise.all(
        [1, 2, 3].map(() =>
          startService(['--config', config.dir, '--redis', harness.server.url, '--prefix', prefix, ...PATIENT]),
        ),
      );
      assert.equal(await admittedOf(services), 300);
      assert.deepEqual(await stopAll(services), [0, 0, 0]);
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
      const services = await Promise.all(
        [1, 2, 3].map(() =>
          startService(['--config', config.dir, '--cluster', urls.join(','), '--prefix', prefix, ...PATIENT]),
        ),
      );
      assert.ok(
        services[0]?.stderr.some((line) =>
          line.startsWith('sluice serve: counting in Redis Cluster redis://127.0.0.1:'),
        ),
      );
      assert.equal(await admittedOf(services), 300);
      assert.deepEqual(await stopAll(services), [0, 0, 0]);
    } finally {
      await config.remove();
    }
  });

  it('on SIGTERM answers the calls in flight, then exits 0', async () => {
    const redis = await startRedisServer();
    const proxy = await startProxy(redis.port);
    const config = await configDir({ 'rules.yaml': ONE_RULE(5) });
    const client = { grpc: undefined as ReturnType<typeof rlsClient> | undefined };
    try {
      // A timeout long enough that the held call is answered by Redis, not by the failure policy.
      const service = await startService([
        '--config',
        config.dir,
        '--redis',
        `redis://127.0.0.1:${proxy.port}`,
        '--timeout',
        '60s',
      ]);
      client.grpc = rlsClient(service.grpcPort);
      assert.equal(
        (await client.grpc.shouldRateLimit({ domain: 'edge', descriptors: [descriptor(['k', 'v'])] })).overallCode,
        'OK',
      );
      proxy.blackHole();
      const held = client.grpc.shouldRateLimit({ domain: 'edge', descriptors: [descriptor(['k', 'v'])] });
      const inFlight = async () =>
        (await (await fetch(`http://127.0.0.1:${service.httpPort}/metrics`)).text()).includes(
          'sluice_serve_in_flight{transport="grpc"} 1\n',
        );
      await waitFor('the call to be in flight', inFlight);
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
      client.grpc?.close();
      await proxy.stop();
      await redis.stop();
      await config.remove();
    }
  });

  it('reloads a changed config by itself, and refuses a bad one, serving on with the last good one', async () => {
    const config = await configDir({ 'rules.yaml': ONE_RULE(5) });
    try {
      const service = await startService(['--config', config.dir]);
      const rules = async () => (await fetch(`http://127.0.0.1:${service.httpPort}/rlconfig`)).text();
      const client = rlsClient(service.grpcPort);
      const limitNow = async () =>
        (await client.shouldRateLimit({ domain: 'edge', descriptors: [descriptor(['k', 'v'])] })).statuses[0]
          ?.currentLimit?.requestsPerUnit;
      try {
        await config.write('rules.yaml', ONE_RULE(7));
        await waitFor('the change to be served', async () => (await rules()).includes('requests_per_unit=7'));
        assert.equal(await limitNow(), 7);
        await config.write('rules.yaml', ONE_RULE(7).replace('hour', 'fortnight'));
        await waitFor('the bad change to be refused', () =>
          service.stderr.some((line) => line.includes('the change is refused')),
        );
        assert.ok(
          service.stderr.some((line) =>
            /rules\.yaml at descriptors\[0\]\.rate_limit\.unit: .*; got "fortnight"; the change is refused and the previous config keeps serving$/.test(
              line,
            ),
          ),
          service.stderr.join('\n'),
        );
        assert.equal(await limitNow(), 7);
      } finally {
        client.close();
      }
      assert.deepEqual(await stopAll([service]), [0]);
    } finally {
      await config.remove();
    }
  });

  it('says when it counts in memory', async () => {
    const config = await configDir({ 'rules.yaml': ONE_RULE(5) });
    try {
      const service = await startService(['--config', config.dir]);
      assert.ok(
        service.stderr.some((line) =>
          line.startsWith(
            "sluice serve: counting in this process's memory (no --redis, --cluster or REDIS_URL), so run one instance only",
          ),
        ),
        service.stderr.join('\n'),
      );
      assert.deepEqual(await stopAll([service]), [0]);
    } finally {
      await config.remove();
    }
  });

  it('refuses a bad config with one line naming the file, the path and the value, and exit code 2', async () => {
    const config = await configDir({
      'rules.yaml':
        'domain: edge\ndescriptors:\n  - key: k\n    rate_limit: { unit: fortnight, requests_per_unit: 5 }\n',
    });
    try {
      const { code, stderr } = await runToExit(['--config', config.dir]);
      assert.equal(code, 2);
      assert.deepEqual(stderr, [
        `sluice: config ${config.dir}/rules.yaml at descriptors[0].rate_limit.unit: must be second, minute, hour or day (or give a "window" such as 5m); got "fortnight"`,
      ]);
      assert.equal((await runToExit(['--config', `${config.dir}/missing.yaml`])).code, 2);
      assert.equal((await runToExit([])).code, 2);
    } finally {
      await config.remove();
    }
  });
});
