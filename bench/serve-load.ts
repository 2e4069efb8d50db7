import { Agent, request } from 'node:http';
import { connect, constants } from 'node:http2';
import { run, type Decide, type Run } from './measure.js';

/**
 * One load-generating process of bench/serve.ts: it holds its own gRPC connection and its own
 * keep-alive HTTP agent, runs what the bench orders, and answers with the run and the CPU time it
 * spent on it.
 *
 * Its gRPC client is a few lines over node:http2 that send one prepared message per key: the same
 * bytes on the wire as any client's, at a fraction of @grpc/grpc-js's CPU per call (measured at
 * 3 to 5 times the service's own), which on a small machine would take the CPU the service needs.
 */
export interface LoadOrder {
  readonly transport: 'grpc' | 'json';
  readonly grpcPort: number;
  readonly httpPort: number;
  readonly keys: readonly string[];
  readonly inFlight: number;
  readonly durationMs: number;
}

export interface LoadReply {
  readonly run?: Run;
  /** CPU time this process spent during the run, user and system, in microseconds. */
  readonly cpuMicros?: number;
  readonly error?: string;
}

interface Client {
  readonly decide: Decide;
  close(): void;
}

const DOMAIN = 'bench';
const DESCRIPTOR_KEY = 'k';

/** Protobuf's length-delimited field: its tag, its length (every one here is under 128), its bytes. */
function field(tag: number, bytes: Buffer): Buffer {
  if (bytes.length > 127) throw new Error('a bench key must be shorter');
  return Buffer.concat([Buffer.from([tag, bytes.length]), bytes]);
}

/**
 * The gRPC message of `RateLimitRequest { domain, descriptors: [{ entries: [{ key, value }] }] }`:
 * the 5-byte frame header (not compressed, length), then the protobuf (src/serve/proto's numbers).
 */
function requestMessage(value: string): Buffer {
  const entry = Buffer.concat([field(0x0a, Buffer.from(DESCRIPTOR_KEY)), field(0x12, Buffer.from(value))]);
  const message = Buffer.concat([field(0x0a, Buffer.from(DOMAIN)), field(0x12, field(0x0a, entry))]);
  const header = Buffer.alloc(5);
  header.writeUInt32BE(message.length, 1);
  return Buffer.concat([header, message]);
}

// A RateLimitResponse starts with overall_code (field 1, varint): OK is 1. Encoders write fields in
// number order, so an answer of OK starts, after the frame header, with these two bytes.
const OVERALL_OK = Buffer.from([0x08, 0x01]);

function grpcClient(port: number, keys: readonly string[]): Client {
  const session = connect(`http://127.0.0.1:${port}`);
  const messages = new Map(keys.map((key) => [key, requestMessage(key)]));
  const headers = {
    [constants.HTTP2_HEADER_METHOD]: 'POST',
    [constants.HTTP2_HEADER_PATH]: '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
    [constants.HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc',
    [constants.HTTP2_HEADER_TE]: 'trailers',
  };
  return {
    decide: (key) =>
      new Promise<void>((resolve, reject) => {
        const stream = session.request(headers);
        const chunks: Buffer[] = [];
        let status: unknown;
        stream.on('data', (chunk: Buffer) => chunks.push(chunk));
        stream.once('trailers', (trailers) => (status = trailers['grpc-status']));
        stream.once('end', () => {
          const answer = Buffer.concat(chunks);
          if (status === '0' && answer.subarray(5, 7).equals(OVERALL_OK)) resolve();
          else reject(new Error(`ShouldRateLimit answered grpc-status ${String(status)}, ${answer.toString('hex')}`));
        });
        stream.once('error', reject);
        stream.end(messages.get(key) ?? requestMessage(key));
      }),
    close: () => session.close(),
  };
}

function jsonClient(port: number, sockets: number): Client {
  const agent = new Agent({ keepAlive: true, maxSockets: sockets });
  const options = {
    agent,
    host: '127.0.0.1',
    port,
    method: 'POST',
    path: '/json',
    headers: { 'Content-Type': 'application/json' },
  };
  return {
    decide: (key) =>
      new Promise<void>((resolve, reject) => {
        const req = request(options, (res) => {
          res.resume();
          res.once('end', () =>
            res.statusCode === 200 ? resolve() : reject(new Error(`POST /json answered ${res.statusCode}`)),
          );
          res.once('error', reject);
        });
        req.once('error', reject);
        req.end(JSON.stringify({ domain: DOMAIN, descriptors: [{ entries: [{ key: DESCRIPTOR_KEY, value: key }] }] }));
      }),
    close: () => agent.destroy(),
  };
}

const clients = new Map<LoadOrder['transport'], Client>();

async function carryOut(order: LoadOrder): Promise<LoadReply> {
  let client = clients.get(order.transport);
  if (client === undefined) {
    client =
      order.transport === 'grpc' ? grpcClient(order.grpcPort, order.keys) : jsonClient(order.httpPort, order.inFlight);
    clients.set(order.transport, client);
  }
  const before = process.cpuUsage();
  const result = await run(client.decide, order.keys, order.inFlight, order.durationMs);
  const used = process.cpuUsage(before);
  return { run: result, cpuMicros: used.user + used.system };
}

process.on('message', (order: LoadOrder) => {
  carryOut(order).then(
    (reply) => process.send?.(reply),
    (error: unknown) => process.send?.({ error: error instanceof Error ? error.message : String(error) }),
  );
});
process.once('disconnect', () => {
  for (const client of clients.values()) client.close();
});
