import { connect, type Socket } from 'node:net';
import {
  ACK,
  END_HEADERS,
  END_STREAM,
  FRAME,
  PADDED,
  PREFACE,
  frame,
  frameHeader,
  grpcMessage,
  headerBlock,
  hpackString,
} from '../test/support/h2.js';
import { paced, run, type Decide, type Run } from './measure.js';
import { patternClient } from './redis-pattern.js';

/**
 * One load-generating process of bench/serve.ts: it holds its own gRPC connection and its own
 * HTTP connections to each server it asks, runs what the bench orders, and answers with the run and
 * the CPU time it spent.
 *
 * Both clients are written over node:net, sending requests prepared once per key, as a load
 * generator such as h2load or wrk does: on a machine of few cores, whatever CPU the callers spend
 * the service cannot have, and @grpc/grpc-js's client spent several times the service's CPU per
 * call, node:http2's and node:http's about as much as the service.
 */
export interface LoadOrder {
  /** 'redis-pattern': envoyproxy/ratelimit's Redis commands per request, straight to Redis (bench/redis-pattern.ts). */
  readonly transport: 'grpc' | 'json' | 'redis-pattern';
  /** The server's port for that transport: `sluice serve`'s, a floor server's (bench/serve-floor.ts), or Redis's. */
  readonly port: number;
  readonly keys: readonly string[];
  /** Calls in flight (a closed loop); for 'redis-pattern', connections, each with one request at a time. */
  readonly inFlight: number;
  readonly durationMs: number;
  /** Calls started per second, whatever the answers (an open loop), instead of `inFlight` at a time. */
  readonly perSecond?: number;
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
  return grpcMessage(Buffer.concat([field(0x0a, Buffer.from(DOMAIN)), field(0x12, field(0x0a, entry))]));
}

// A RateLimitResponse starts with overall_code (field 1, varint): OK is 1. Encoders write fields in
// number order, so an answer of OK starts, after the frame header, with these two bytes.
const OVERALL_OK = Buffer.from([0x08, 0x01]);

// The connection's receive window (65,535 bytes at the start) is given back in steps of this many.
const WINDOW_STEP = 1 << 14;

/**
 * A gRPC request's header block, the same for every call: HPACK fields from the static table
 * (:method POST is 3, :scheme http is 6) or literals never added to the server's dynamic table, so
 * the block never changes. Name indexes: :authority 1, :path 4, content-type 31 (15 + 16). Its
 * grpc-timeout is there as Envoy always sends one, long enough that no call reaches it.
 */
function requestHeaderBlock(authority: string, path: string): Buffer {
  return Buffer.concat([
    Buffer.from([0x83, 0x86]),
    Buffer.from([0x04]),
    hpackString(path),
    Buffer.from([0x01]),
    hpackString(authority),
    Buffer.from([0x0f, 0x10]),
    hpackString('application/grpc'),
    headerBlock([
      ['te', 'trailers'],
      ['grpc-timeout', '10S'],
    ]),
  ]);
}

/**
 * gRPC over one HTTP/2 connection written by hand over node:net: a HEADERS and a DATA frame per
 * call, prepared but for the stream id, and an answer read from the frames of its stream. Its
 * header block never changes, so it needs no HPACK decoder: a call succeeded when its stream
 * carried a message answering OK (a failed call ends with trailers alone).
 */
function grpcClient(port: number, keys: readonly string[]): Client {
  const block = requestHeaderBlock(`127.0.0.1:${port}`, '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit');
  const messages = new Map(keys.map((key) => [key, requestMessage(key)]));
  const calls = new Map<number, { resolve(): void; reject(error: Error): void; answer?: Buffer }>();
  let nextStream = 1;
  let unacknowledged = 0;
  let received: Buffer = Buffer.alloc(0);
  const socket = connect(port, '127.0.0.1').setNoDelay(true);
  socket.write(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0, Buffer.alloc(0))]));

  // The bench's runs keep the connection busy, and the service closes none that is: once it is gone, every call fails.
  let gone: Error | undefined;
  const failAll = (error: Error) => {
    gone = error;
    for (const call of calls.values()) call.reject(error);
    calls.clear();
  };
  function finish(stream: number): void {
    const call = calls.get(stream);
    if (call === undefined) return;
    calls.delete(stream);
    if (call.answer?.subarray(5, 7).equals(OVERALL_OK)) call.resolve();
    else call.reject(new Error(`ShouldRateLimit answered no OK: ${call.answer?.toString('hex') ?? 'no message'}`));
  }
  function receive(type: number, flags: number, stream: number, payload: Buffer): void {
    if (type === FRAME.DATA) {
      unacknowledged += payload.length;
      if (unacknowledged >= WINDOW_STEP) {
        const increment = Buffer.alloc(4);
        increment.writeUInt32BE(unacknowledged);
        socket.write(frame(FRAME.WINDOW_UPDATE, 0, 0, increment));
        unacknowledged = 0;
      }
      const data = flags & PADDED ? payload.subarray(1, payload.length - (payload[0] as number)) : payload;
      const call = calls.get(stream);
      if (call) call.answer = call.answer ? Buffer.concat([call.answer, data]) : data;
      if (flags & END_STREAM) finish(stream);
    } else if (type === FRAME.HEADERS) {
      if (flags & END_STREAM) finish(stream);
    } else if (type === FRAME.RST_STREAM) {
      calls.get(stream)?.reject(new Error(`the service reset the call (code ${payload.readUInt32BE(0)})`));
      calls.delete(stream);
    } else if (type === FRAME.SETTINGS && !(flags & ACK)) {
      socket.write(frame(FRAME.SETTINGS, ACK, 0, Buffer.alloc(0)));
    } else if (type === FRAME.PING && !(flags & ACK)) {
      socket.write(frame(FRAME.PING, ACK, 0, payload));
    } else if (type === FRAME.GOAWAY) {
      failAll(new Error('the service sent GOAWAY'));
    }
  }
  socket.on('data', (chunk: Buffer) => {
    received = received.length === 0 ? chunk : Buffer.concat([received, chunk]);
    let at = 0;
    while (received.length - at >= 9) {
      const length = received.readUIntBE(at, 3);
      if (received.length - at < 9 + length) break;
      const stream = received.readUInt32BE(at + 5) & 0x7fff_ffff;
      receive(
        received[at + 3] as number,
        received[at + 4] as number,
        stream,
        received.subarray(at + 9, at + 9 + length),
      );
      at += 9 + length;
    }
    received = received.subarray(at);
  });
  socket.on('error', failAll);
  socket.on('close', () => failAll(new Error('the service closed the connection')));

  return {
    decide: (key) =>
      new Promise<void>((resolve, reject) => {
        if (gone) return reject(gone);
        const stream = nextStream;
        nextStream += 2;
        calls.set(stream, { resolve, reject });
        const message = messages.get(key) ?? requestMessage(key);
        socket.write(
          Buffer.concat([
            frameHeader(block.length, FRAME.HEADERS, END_HEADERS, stream),
            block,
            frameHeader(message.length, FRAME.DATA, END_STREAM, stream),
            message,
          ]),
        );
      }),
    close: () => socket.destroy(),
  };
}

/**
 * One keep-alive HTTP/1.1 connection, asked one request at a time; opened again when the service
 * has closed it (Node closes a connection idle for 5 s, as it is between the bench's runs).
 */
function connection(port: number): { send(request: Buffer): Promise<void>; close(): void } {
  let socket: Socket | undefined;
  let waiting: { resolve(): void; reject(error: Error): void } | undefined;
  let received: Buffer = Buffer.alloc(0);
  const settle = (error?: Error) => {
    const settled = waiting;
    waiting = undefined;
    if (error) settled?.reject(error);
    else settled?.resolve();
  };
  function open(): Socket {
    const opened = connect(port, '127.0.0.1').setNoDelay(true);
    received = Buffer.alloc(0);
    opened.on('data', (chunk: Buffer) => {
      received = received.length === 0 ? chunk : Buffer.concat([received, chunk]);
      const headEnd = received.indexOf('\r\n\r\n');
      if (headEnd < 0) return;
      const head = received.toString('latin1', 0, headEnd);
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1]);
      if (received.length < headEnd + 4 + length) return;
      received = received.subarray(headEnd + 4 + length);
      const status = head.slice(9, 12);
      settle(status === '200' ? undefined : new Error(`POST /json answered ${status}`));
    });
    opened.on('error', (error) => settle(error));
    opened.on('close', () => {
      if (socket === opened) socket = undefined;
      settle(new Error('the service closed the connection during a call'));
    });
    return opened;
  }
  return {
    send: (request) =>
      new Promise((resolve, reject) => {
        waiting = { resolve, reject };
        (socket ??= open()).write(request);
      }),
    close: () => socket?.destroy(),
  };
}

/** POST /json over `sockets` keep-alive connections, each with one call at a time. */
function jsonClient(port: number, sockets: number, keys: readonly string[]): Client {
  const requests = new Map(
    keys.map((key) => {
      const body = JSON.stringify({
        domain: DOMAIN,
        descriptors: [{ entries: [{ key: DESCRIPTOR_KEY, value: key }] }],
      });
      const head = `POST /json HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
      return [key, Buffer.from(head + body)];
    }),
  );
  const all = Array.from({ length: sockets }, () => connection(port));
  const idle = [...all];
  return {
    decide: async (key) => {
      const free = idle.pop();
      if (free === undefined) throw new Error('more calls in flight than connections');
      try {
        await free.send(requests.get(key) as Buffer);
      } finally {
        idle.push(free);
      }
    },
    close: () => all.forEach((c) => c.close()),
  };
}

// One client per transport and port, kept across runs: the bench keeps every server it asks running
// until it ends, so a port names one server.
const clients = new Map<string, Client>();

async function carryOut(order: LoadOrder): Promise<LoadReply> {
  const name = `${order.transport}:${order.port}`;
  let client = clients.get(name);
  if (client === undefined) {
    client =
      order.transport === 'grpc'
        ? grpcClient(order.port, order.keys)
        : order.transport === 'json'
          ? jsonClient(order.port, order.inFlight, order.keys)
          : patternClient(order.port, DOMAIN, DESCRIPTOR_KEY, order.keys, order.inFlight);
    clients.set(name, client);
  }
  const before = process.cpuUsage();
  const result =
    order.perSecond === undefined
      ? await run(client.decide, order.keys, order.inFlight, order.durationMs)
      : await paced(client.decide, order.keys, order.perSecond, order.durationMs);
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
