import assert from 'node:assert/strict';
import { copyFile, readFile, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { InvalidOptionError, memoryStore } from '../../src/index.js';
import { createServer, type SluiceServer } from '../../src/serve/index.js';
import { makeCa, removeCa, type KeyPair, type TestCa } from '../support/certs.js';
import { waitFor } from '../support/cluster.js';
import { healthClient } from '../support/health.js';
import { configDir, descriptor, rlsClient } from '../support/rls.js';
import { useServices } from '../support/service.js';

// TLS and mutual TLS on both ports, with a CA, server and client certificates made by openssl at
// test time: asked through a real @grpc/grpc-js client and node:https.

const services = useServices();
const RULES = 'domain: edge\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 100 }\n';
const ASK = { domain: 'edge', descriptors: [descriptor(['k', 'v'])] };

let ca: TestCa;
let otherCa: TestCa;
let server: KeyPair;
let client: KeyPair;
let stranger: KeyPair;
let config: Awaited<ReturnType<typeof configDir>>;
before(async () => {
  ca = await makeCa('test-ca');
  otherCa = await makeCa('other-ca');
  server = await ca.server('server');
  client = await ca.client('client');
  stranger = await otherCa.client('stranger');
  config = await configDir({ 'rules.yaml': RULES });
});
after(async () => {
  await Promise.all([removeCa(ca), removeCa(otherCa), config.remove()]);
});

/** What a client trusts, and the certificate it presents (none: undefined). */
interface ClientTls {
  trusts: TestCa;
  presents?: KeyPair;
}

async function credentials({ trusts, presents }: ClientTls): Promise<grpc.ChannelCredentials> {
  const own = presents && (await presents.read());
  return grpc.credentials.createSsl(await readFile(trusts.cert), own?.key ?? null, own?.cert ?? null);
}

/** One ShouldRateLimit call on a connection of its own: the overall code, or the gRPC status code of the failure. */
async function grpcCall(port: number, tls: ClientTls): Promise<string | number> {
  const rls = rlsClient(port, await credentials(tls), { 'grpc.use_local_subchannel_pool': 1 });
  try {
    return (await rls.shouldRateLimit(ASK)).overallCode;
  } catch (error) {
    return (error as grpc.ServiceError).code;
  } finally {
    rls.close();
  }
}

/** POST /json over node:https on a connection of its own: the status, or 'refused' when TLS refuses the client. */
async function jsonCall(port: number, { trusts, presents }: ClientTls): Promise<number | 'refused'> {
  const own = presents && (await presents.read());
  const ca = await readFile(trusts.cert);
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/json', method: 'POST', ca, ...own, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', () => resolve('refused'));
    });
    req.on('error', () => resolve('refused'));
    req.end(JSON.stringify(ASK));
  });
}

const UNAVAILABLE = grpc.status.UNAVAILABLE;

describe('TLS and mutual TLS, from createServer', () => {
  let sluice: SluiceServer;
  before(async () => {
    sluice = await createServer({
      config: config.dir,
      store: memoryStore(),
      grpcPort: 0,
      httpPort: 0,
      host: '127.0.0.1',
      watch: false,
      tls: { cert: server.cert, key: server.key, clientCa: ca.cert },
    });
  });
  after(() => sluice.close());

  it('serves a client with a certificate the client CA signed, over gRPC and /json', async () => {
    assert.equal(await grpcCall(sluice.grpcPort, { trusts: ca, presents: client }), 'OK');
    assert.equal(await jsonCall(sluice.httpPort, { trusts: ca, presents: client }), 200);
  });

  it('refuses a client without a certificate, or with one another CA signed', async () => {
    assert.equal(await grpcCall(sluice.grpcPort, { trusts: ca }), UNAVAILABLE);
    assert.equal(await grpcCall(sluice.grpcPort, { trusts: ca, presents: stranger }), UNAVAILABLE);
    assert.equal(await jsonCall(sluice.httpPort, { trusts: ca }), 'refused');
    assert.equal(await jsonCall(sluice.httpPort, { trusts: ca, presents: stranger }), 'refused');
  });

  it('answers gRPC health over TLS', async () => {
    const health = healthClient(sluice.grpcPort, await credentials({ trusts: ca, presents: client }));
    try {
      assert.equal(await health.check('envoy.service.ratelimit.v3.RateLimitService'), 'SERVING');
    } finally {
      health.close();
    }
  });

  it('refuses tls options that are incomplete, unknown, unreadable or mismatched, naming the option', async () => {
    const start = (tls: unknown) =>
      createServer({ config: config.dir, store: memoryStore(), grpcPort: 0, httpPort: 0, watch: false, tls } as never);
    const refused = async (tls: unknown, option: string, says: RegExp) => {
      const error = await start(tls).then(
        () => assert.fail('started'),
        (e: unknown) => e,
      );
      assert.ok(error instanceof InvalidOptionError, String(error));
      assert.equal(error.option, option);
      assert.match(error.message, says);
    };
    await refused({ cert: server.cert }, 'tls.key', /tls\.cert and tls\.key go together/);
    await refused({ key: server.key }, 'tls.cert', /tls\.cert and tls\.key go together/);
    await refused({ cert: server.cert, key: server.key, ca: ca.cert }, 'tls.ca', /tls has no option "ca"/);
    await refused({ cert: join(ca.dir, 'missing.pem'), key: server.key }, 'tls.cert', /ENOENT/);
    await refused({ cert: server.cert, key: client.key }, 'tls', /key values mismatch/);
    await refused('yes', 'tls', /an options object/);
  });
});

describe('TLS and mutual TLS, from the command', () => {
  it('serves both ports to clients with a certificate, refuses those without', async () => {
    const service = await services.start([
      '--config',
      config.dir,
      '--tls-cert',
      server.cert,
      '--tls-key',
      server.key,
      '--tls-client-ca',
      ca.cert,
    ]);
    assert.ok(service.stderr.some((line) => line.includes('gRPC (TLS) on 127.0.0.1:')));
    assert.equal(await grpcCall(service.grpcPort, { trusts: ca, presents: client }), 'OK');
    assert.equal(await jsonCall(service.httpPort, { trusts: ca, presents: client }), 200);
    assert.equal(await grpcCall(service.grpcPort, { trusts: ca }), UNAVAILABLE);
    assert.equal(await jsonCall(service.httpPort, { trusts: ca }), 'refused');
    assert.equal(await service.stop(), 0);
  });

  it('rereads its certificates on SIGHUP: new connections get the new ones, open ones go on, a bad one is refused', async () => {
    const files = await configDir({});
    const [cert, key] = [join(files.dir, 'server.pem'), join(files.dir, 'server-key.pem')];
    await Promise.all([copyFile(server.cert, cert), copyFile(server.key, key)]);
    try {
      const service = await services.start(['--config', config.dir, '--tls-cert', cert, '--tls-key', key]);
      const open = rlsClient(service.grpcPort, await credentials({ trusts: ca }));
      assert.equal((await open.shouldRateLimit(ASK)).overallCode, 'OK');
      const said = (what: string) =>
        waitFor(`the service to say ${what}`, () => service.stderr.some((line) => line.includes(what)));

      const renewed = await otherCa.server('renewed');
      await copyFile(renewed.key, key);
      await copyFile(renewed.cert, cert);
      service.child.kill('SIGHUP');
      await said('sluice serve: TLS certificates reloaded');
      assert.equal(await grpcCall(service.grpcPort, { trusts: otherCa }), 'OK');
      assert.equal(await jsonCall(service.httpPort, { trusts: otherCa }), 200);
      assert.equal(await grpcCall(service.grpcPort, { trusts: ca }), UNAVAILABLE);
      assert.equal(await jsonCall(service.httpPort, { trusts: ca }), 'refused');
      // The connection opened before the swap keeps its session, and serves on.
      assert.equal((await open.shouldRateLimit(ASK)).overallCode, 'OK');
      open.close();

      await writeFile(cert, 'not a certificate\n');
      service.child.kill('SIGHUP');
      await said('the certificates in use keep serving');
      assert.equal(await grpcCall(service.grpcPort, { trusts: otherCa }), 'OK');
      assert.equal(await service.stop(), 0);
    } finally {
      await files.remove();
    }
  });

  it('refuses --tls-cert without --tls-key, and --tls-client-ca without both, naming the flag', async () => {
    const alone = await services.runToExit(['--config', config.dir, '--tls-cert', server.cert]);
    assert.equal(alone.code, 2);
    assert.match(alone.stderr.join('\n'), /--tls-cert and --tls-key go together; got --tls-cert alone/);
    const withCaOnly = await services.runToExit(['--config', config.dir, '--tls-client-ca', ca.cert]);
    assert.equal(withCaOnly.code, 2);
    assert.match(withCaOnly.stderr.join('\n'), /--tls-client-ca needs --tls-cert and --tls-key/);
  });
});
