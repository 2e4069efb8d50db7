import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { freePort, startRedisServer, type RedisServer } from '../../src/cli/redis-server.js';
import { createLimiter, redisStore, type RedisClient } from '../../src/index.js';
import { algorithms } from '../support/algorithms.js';
import { keysWithTtl, uniquePrefix } from '../support/redis.js';

const run = promisify(execFile);
const HOUR = 3_600_000;

/** A CA and a server certificate for 127.0.0.1 signed by it, made now (no key is checked in). */
async function makeCertificates(dir: string): Promise<{ ca: string; cert: string; key: string }> {
  const file = (name: string) => join(dir, name);
  const ecKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await run('openssl', [
    'req',
    '-x509',
    ...ecKey,
    '-keyout',
    file('ca.key'),
    '-out',
    file('ca.crt'),
    '-days',
    '1',
    '-subj',
    '/CN=sluice test CA',
  ]);
  await run('openssl', [
    'req',
    ...ecKey,
    '-keyout',
    file('server.key'),
    '-out',
    file('server.csr'),
    '-subj',
    '/CN=127.0.0.1',
  ]);
  await writeFile(file('server.ext'), 'subjectAltName=IP:127.0.0.1\n');
  await run('openssl', [
    'x509',
    '-req',
    '-in',
    file('server.csr'),
    '-CA',
    file('ca.crt'),
    '-CAkey',
    file('ca.key'),
    '-CAcreateserial',
    '-out',
    file('server.crt'),
    '-days',
    '1',
    '-extfile',
    file('server.ext'),
  ]);
  return { ca: file('ca.crt'), cert: file('server.crt'), key: file('server.key') };
}

describe('TLS: sluice through both clients to a redis-server on --tls-port', () => {
  let dir: string;
  let server: RedisServer;
  let tlsPort: number;
  let ca: Buffer;
  // The plain port stays open for the test's own look behind sluice's back (TTLs).
  let plain: Redis;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sluice-tls-'));
    const files = await makeCertificates(dir);
    ca = await readFile(files.ca);
    tlsPort = await freePort();
    server = await startRedisServer([
      '--tls-port',
      String(tlsPort),
      '--tls-cert-file',
      files.cert,
      '--tls-key-file',
      files.key,
      '--tls-ca-cert-file',
      files.ca,
      '--tls-auth-clients',
      'no',
    ]);
    plain = new Redis(server.url);
  });
  after(async () => {
    await plain?.quit();
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const clients: {
    name: string;
    connect: () => Promise<{ client: RedisClient; close: () => Promise<unknown> }>;
  }[] = [
    {
      name: 'ioredis',
      async connect() {
        const client = new Redis({ host: '127.0.0.1', port: tlsPort, tls: { ca } });
        await once(client, 'ready');
        return { client, close: () => client.quit() };
      },
    },
    {
      name: 'node-redis',
      async connect() {
        const client = createClient({ socket: { host: '127.0.0.1', port: tlsPort, tls: true, ca } });
        await client.connect();
        return { client, close: () => client.quit() };
      },
    },
  ];

  for (const { name, connect } of clients) {
    it(`${name}: every algorithm admits exactly its limit of 200 concurrent calls, over TLS, and every key has a TTL`, async () => {
      const { client, close } = await connect();
      try {
        const prefix = uniquePrefix();
        const admitted = await Promise.all(
          algorithms.map(async (algorithm) => {
            const limiter = createLimiter({
              store: redisStore(client),
              prefix,
              policy: algorithm.policy(37, HOUR),
              onStoreError: 'deny',
            });
            const decisions = await Promise.all(Array.from({ length: 200 }, () => limiter.limit('hot')));
            assert.ok(
              decisions.every((d) => d.reason === undefined),
              'every call decided by Redis',
            );
            return decisions.filter((d) => d.allowed).length;
          }),
        );
        assert.deepEqual(
          admitted,
          algorithms.map(() => 37),
        );
        const ttls = await keysWithTtl(plain, prefix);
        assert.equal(ttls.size, algorithms.length);
        for (const [key, ttl] of ttls) assert.ok(ttl > 0, `${key} has PTTL ${ttl}`);
      } finally {
        await close();
      }
    });
  }

  it('the sluice command takes a rediss:// URL, trusting the CA given by NODE_EXTRA_CA_CERTS', async () => {
    const argv = [
      '--import',
      'tsx',
      'src/cli/main.ts',
      'inspect',
      'k',
      '--policy',
      'gcra:5/1s',
      '--redis',
      `rediss://127.0.0.1:${tlsPort}`,
      '--json',
    ];
    const { stdout } = await run(process.execPath, argv, {
      env: { ...process.env, NODE_EXTRA_CA_CERTS: join(dir, 'ca.crt') },
    });
    assert.equal((JSON.parse(stdout) as { decision: { remaining: number } }).decision.remaining, 5);
  });

  it('a client that does not trust the CA is refused the connection: the certificate is checked', async () => {
    const client = createClient({ socket: { host: '127.0.0.1', port: tlsPort, tls: true, reconnectStrategy: false } });
    client.on('error', () => {});
    await assert.rejects(client.connect(), /self[- ]signed certificate/);
  });
});
