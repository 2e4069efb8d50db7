import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { startRedisServer } from '../../src/cli/redis-server.js';
import { grpcMessage, rawConnection, type RawAnswer } from '../support/h2.js';
import { waitFor } from '../support/cluster.js';
import { startProxy } from '../support/proxy.js';
import { configDir, descriptor, protoFields, rlsClient } from '../support/rls.js';
import { PATIENT, useServices, type Service } from '../support/service.js';

// sluice serve's gRPC on the wire, asked of the built command as a process: by hand-framed HTTP/2
// as Envoy sends it, and by @grpc/grpc-js. What it decides is in service.test.ts.

const services = useServices();
const configs: Awaited<ReturnType<typeof configDir>>[] = [];
after(() => Promise.all(configs.map((config) => config.remove())));

const RULES = `domain: edge
descriptors:
  - key: path
    value: /login
    rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: k
    rate_limit: { unit: hour, requests_per_unit: 300 }
  - key: hot
    rate_limit: { unit: hour, requests_per_unit: 1000, lease: { units: 10, ms: 1h } }
`;

async function serve(flags: readonly string[] = []): Promise<Service> {
  const config = await configDir({ 'rules.yaml': RULES });
  configs.push(config);
  return services.start(['--config', config.dir, '--no-watch', ...flags]);
}

const SHOULD_RATE_LIMIT = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';

/**
 * The headers Envoy's gRPC client sends the rate limit service (its grpc-timeout is the filter's
 * `timeout`), with `changes`: a value replaced, or added where the name is new.
 */
function envoyHeaders(changes: Record<string, string> = {}): [string, string][] {
  const headers: Record<string, string> = {
    ':method': 'POST',
    ':scheme': 'http',
    ':path': SHOULD_RATE_LIMIT,
    ':authority': 'ratelimit',
    'content-type': 'application/grpc',
    te: 'trailers',
    'grpc-timeout': '20000m',
    'user-agent': 'envoy/1.33.0',
    'x-envoy-internal': 'true',
    'x-forwarded-proto': 'http',
    'x-request-id': '6f0b6b7e-8d1a-4a39-9c8e-2b1c5d9a0e11',
    ...changes,
  };
  return Object.entries(headers);
}

/** A protobuf length-delimited field (every length here is under 128). */
const field = (tag: number, bytes: Buffer) => Buffer.concat([Buffer.from([tag, bytes.length]), bytes]);

/** RateLimitRequest { domain, descriptors: [{ entries: [{ key, value }] }], hits_addend: 1 }, by field number. */
function requestBytes(domain: string, ...keyValues: string[]): Buffer {
  const descriptors: Buffer[] = [];
  for (let i = 0; i < keyValues.length; i += 2) {
    const [key = '', value = ''] = keyValues.slice(i, i + 2);
    const entry = Buffer.concat([field(0x0a, Buffer.from(key)), field(0x12, Buffer.from(value))]);
    descriptors.push(field(0x12, field(0x0a, entry)));
  }
  return Buffer.concat([field(0x0a, Buffer.from(domain)), ...descriptors, Buffer.from([0x18, 1])]);
}

/** The fields of an answer that ended with trailers alone (a Trailers-Only response). */
function trailersOnly(answer: RawAnswer): Record<string, string> {
  assert.equal(answer.blocks.length, 1, JSON.stringify(answer.blocks));
  assert.equal(answer.data.length, 0);
  return Object.fromEntries(answer.blocks[0] ?? []);
}

describe('sluice serve answers Envoy, hand-framed', () => {
  it('a ShouldRateLimit call: headers, one message, grpc-status 0 in the trailers', async () => {
    const { grpcPort } = await serve();
    const h2 = await rawConnection(grpcPort);
    try {
      const message = grpcMessage(requestBytes('edge', 'path', '/login'));
      // One DATA frame carrying END_STREAM; then the message cut across frames and an empty last one.
      const answers = [
        await h2.call(envoyHeaders(), [message]),
        await h2.call(envoyHeaders(), [
          message.subarray(0, 3),
          message.subarray(3, 11),
          message.subarray(11),
          Buffer.alloc(0),
        ]),
        await h2.call(envoyHeaders(), [message]),
      ];
      for (const answer of answers) {
        assert.deepEqual(answer.blocks[0], [
          [':status', '200'],
          ['content-type', 'application/grpc'],
        ]);
        assert.deepEqual(answer.blocks[1], [['grpc-status', '0']]);
        assert.equal(answer.blocks.length, 2);
        assert.equal(answer.data[0], 0, 'not compressed');
        assert.equal(answer.data.readUInt32BE(1), answer.data.length - 5);
      }
      const overall = answers.map((answer) => protoFields(answer.data.subarray(5)).get(1)?.[0]);
      assert.deepEqual(overall, [1, 1, 2]); // OK, OK, OVER_LIMIT: 2 an hour
      const status = protoFields(protoFields(answers[0]?.data.subarray(5) ?? Buffer.alloc(0)).get(2)?.[0] as Buffer);
      assert.deepEqual([status.get(1), status.get(3)], [[1], [1]]); // code OK, limit_remaining 1
      const limit = protoFields(status.get(2)?.[0] as Buffer);
      assert.deepEqual([limit.get(1), limit.get(2)], [[2], [3]]); // requests_per_unit 2, unit HOUR
      const reset = protoFields(status.get(4)?.[0] as Buffer);
      assert.ok(((reset.get(1)?.[0] as number | undefined) ?? 0) < 3600);
    } finally {
      h2.close();
    }
  });

  it('fails a call with its status and message in trailers alone', async () => {
    const { grpcPort } = await serve();
    const h2 = await rawConnection(grpcPort);
    try {
      const ask = async (headers: [string, string][], body: Buffer[], open = false) =>
        trailersOnly(await h2.call(headers, body, open));
      const valid = grpcMessage(requestBytes('edge', 'path', '/login'));
      const cases: [string, Record<string, string>, Record<string, string>][] = [
        [
          'an unknown method',
          await ask(envoyHeaders({ ':path': '/envoy.service.ratelimit.v3.RateLimitService/Nope' }), [valid]),
          {
            'grpc-status': '12',
            'grpc-message': 'unknown method Nope for service envoy.service.ratelimit.v3.RateLimitService',
          },
        ],
        [
          'an unknown service',
          await ask(envoyHeaders({ ':path': '/envoy.service.ratelimit.v2.RateLimitService/ShouldRateLimit' }), [valid]),
          { 'grpc-status': '12', 'grpc-message': 'unknown service envoy.service.ratelimit.v2.RateLimitService' },
        ],
        [
          'a request the service refuses',
          await ask(envoyHeaders(), [grpcMessage(requestBytes('', 'path', '/login'))]),
          { 'grpc-status': '3', 'grpc-message': 'domain: must not be empty' },
        ],
        [
          'bytes that are no RateLimitRequest',
          await ask(envoyHeaders(), [grpcMessage(Buffer.from([0x0a, 0x05, 0x61]))]),
          {
            'grpc-status': '13',
            'grpc-message': 'grpc: error unmarshalling request: a field runs past the end of its message',
          },
        ],
        [
          'a message compressed with gzip',
          await ask(envoyHeaders({ 'grpc-encoding': 'gzip' }), [
            grpcMessage(requestBytes('edge', 'path', '/login'), 1),
          ]),
          {
            'grpc-status': '12',
            'grpc-message': 'grpc: Decompressor is not installed for grpc-encoding "gzip"',
            'grpc-accept-encoding': 'identity',
          },
        ],
        [
          'a compressed message without grpc-encoding',
          await ask(envoyHeaders(), [grpcMessage(requestBytes('edge', 'path', '/login'), 1)]),
          { 'grpc-status': '13', 'grpc-message': 'grpc: compressed flag set with identity or empty encoding' },
        ],
        [
          'a message over 4 MiB, told by its header before its body is sent',
          await ask(envoyHeaders(), [Buffer.from([0, 0, 0x40, 0, 1])], true),
          {
            'grpc-status': '8',
            'grpc-message': 'grpc: received message larger than max (4194305 vs. 4194304)',
          },
        ],
        [
          'two messages in a unary call',
          await ask(envoyHeaders(), [valid, valid]),
          { 'grpc-status': '13', 'grpc-message': 'grpc: the call sent more than one request message' },
        ],
        [
          'no message',
          await ask(envoyHeaders(), []),
          { 'grpc-status': '13', 'grpc-message': 'grpc: the call ended without a whole request message' },
        ],
        [
          'a malformed grpc-timeout',
          await ask(envoyHeaders({ 'grpc-timeout': '20 ms' }), [valid]),
          { 'grpc-status': '13', 'grpc-message': 'malformed grpc-timeout: "20 ms"' },
        ],
      ];
      for (const [what, fields, expected] of cases)
        assert.deepEqual(
          { what, ...fields },
          { what, ':status': '200', 'content-type': 'application/grpc', ...expected },
        );
      // The call over 4 MiB was answered before its body was sent: the client is asked to send no
      // more of it (RST_STREAM NO_ERROR, after the answer).
      const early = await h2.call(envoyHeaders(), [Buffer.from([0, 0, 0x40, 0, 1])], true);
      await waitFor('the server to reset the stream', () => h2.resets.get(early.stream) === 0);
      // Not gRPC at all: HTTP says so too.
      const json = await h2.call(envoyHeaders({ 'content-type': 'application/json' }), [Buffer.from('{}')]);
      assert.deepEqual(trailersOnly(json)[':status'], '415');
      assert.deepEqual(trailersOnly(await h2.call(envoyHeaders({ ':method': 'GET' }), []))[':status'], '405');
      // Each of those failed alone: the connection still serves.
      assert.equal(protoFields((await h2.call(envoyHeaders(), [valid])).data.subarray(5)).get(1)?.[0], 1);
    } finally {
      h2.close();
    }
  });
});

describe('sluice serve keeps a call to its deadline', () => {
  it('answers DEADLINE_EXCEEDED once grpc-timeout passes, and a decision that comes later counts nothing', async () => {
    const redis = await startRedisServer();
    const proxy = await startProxy(redis.port);
    try {
      const { grpcPort } = await serve(['--redis', `redis://127.0.0.1:${proxy.port}`, ...PATIENT]);
      const h2 = await rawConnection(grpcPort);
      const ask = async (timeout: string) =>
        h2.call(envoyHeaders({ 'grpc-timeout': timeout }), [grpcMessage(requestBytes('edge', 'k', 'v'))]);
      const remaining = (answer: RawAnswer) => {
        const status = protoFields(answer.data.subarray(5)).get(2)?.[0] as Buffer;
        return protoFields(status).get(3)?.[0];
      };
      try {
        assert.equal(remaining(await ask('10S')), 299);
        // Redis is cut off: the call waits for it past its deadline, and is answered then.
        proxy.blackHole();
        const started = performance.now();
        const late = trailersOnly(await ask('300m'));
        assert.ok(performance.now() - started >= 295, `answered after ${performance.now() - started} ms`);
        assert.deepEqual([late['grpc-status'], late['grpc-message']], ['4', 'deadline exceeded']);
        // The decision reaches Redis now, after its deadline: Redis refuses it, and it counts nothing.
        proxy.heal();
        assert.equal(remaining(await ask('10S')), 298);
        // A deadline already past when the call is read: not decided at all.
        assert.equal(trailersOnly(await ask('1n'))['grpc-status'], '4');
        assert.equal(remaining(await ask('10S')), 297);

        // A leased descriptor is decided first, from its lease; the request's other descriptors
        // still reach Redis with the call's deadline.
        const both = (timeout: string) =>
          h2.call(envoyHeaders({ 'grpc-timeout': timeout }), [grpcMessage(requestBytes('edge', 'hot', 'x', 'k', 'w'))]);
        assert.equal(remaining(await both('10S')), 999);
        proxy.blackHole();
        const leasedLate = trailersOnly(await both('300m'));
        assert.deepEqual([leasedLate['grpc-status'], leasedLate['grpc-message']], ['4', 'deadline exceeded']);
        proxy.heal();
        const after = await h2.call(envoyHeaders({ 'grpc-timeout': '10S' }), [
          grpcMessage(requestBytes('edge', 'k', 'w')),
        ]);
        assert.equal(remaining(after), 298);
      } finally {
        h2.close();
      }
    } finally {
      await proxy.stop();
      await redis.stop();
    }
  });
});

/** A ShouldRateLimit call of `bytes` as they are, through @grpc/grpc-js (which keeps to HTTP/2's flow control). */
function rawUnary(port: number, bytes: Buffer): Promise<Buffer> {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  return new Promise<Buffer>((resolve, reject) =>
    client.makeUnaryRequest(
      SHOULD_RATE_LIMIT,
      (request: Buffer) => request,
      (response: Buffer) => response,
      bytes,
      (error, response) => (error || !response ? reject(error ?? new Error('no response')) : resolve(response)),
    ),
  ).finally(() => client.close());
}

describe('sluice serve with @grpc/grpc-js clients', () => {
  it('takes a request of 4 MiB, and refuses a larger one with RESOURCE_EXHAUSTED', async () => {
    const { grpcPort } = await serve();
    const request = requestBytes('edge', 'k', 'v');
    // An unknown field (15, length-delimited) fills the message up to `size` bytes: the service skips it.
    const filled = (size: number) => {
      const filler = size - request.length - 5;
      const length = Buffer.from([
        (filler & 0x7f) | 0x80,
        ((filler >> 7) & 0x7f) | 0x80,
        ((filler >> 14) & 0x7f) | 0x80,
        (filler >> 21) & 0x7f,
      ]);
      return Buffer.concat([request, Buffer.from([0x7a]), length, Buffer.alloc(filler)]);
    };
    const fourMiB = filled(4 * 1024 * 1024);
    assert.equal(fourMiB.length, 4 * 1024 * 1024);
    assert.equal(protoFields(await rawUnary(grpcPort, fourMiB)).get(1)?.[0], 1);
    await assert.rejects(rawUnary(grpcPort, filled(4 * 1024 * 1024 + 1)), {
      code: grpc.status.RESOURCE_EXHAUSTED,
      details: 'grpc: received message larger than max (4194305 vs. 4194304)',
    });
  });

  it('answers 1,000 concurrent calls of 2 KiB each on one connection, admitting exactly the limit', async () => {
    const { grpcPort } = await serve();
    const client = rlsClient(grpcPort);
    try {
      // 2 MB of requests and their answers through windows of 64 KiB: flow control paces both ways.
      const padding = descriptor(['padding', 'x'.repeat(2048)]);
      const answers = await Promise.all(
        Array.from({ length: 1000 }, () =>
          client.shouldRateLimit({ domain: 'edge', descriptors: [descriptor(['k', 'v']), padding] }),
        ),
      );
      const codes = answers.map((a) => a.overallCode);
      assert.deepEqual(
        [codes.filter((c) => c === 'OK').length, codes.filter((c) => c === 'OVER_LIMIT').length],
        [300, 700],
      );
    } finally {
      client.close();
    }
  });
});
