import {
  constants,
  createSecureServer,
  createServer,
  type Http2SecureServer,
  type Http2Server,
  type IncomingHttpHeaders,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { TlsOptions } from 'node:tls';
import { Deadlines, type Pending } from '../core/deadlines.js';

// gRPC over HTTP/2 (grpc/grpc doc/PROTOCOL-HTTP2.md), as much as a server of unary and
// server-streaming calls needs, on node:http2: its HTTP/2 (framing, HPACK, flow control) is
// nghttp2's. A call is read whole, handed to its method as the bytes of its one message, and
// answered with headers, one message and trailers, or trailers alone when it fails.

/** gRPC status codes (grpc/grpc doc/statuscodes.md). */
export const Status = {
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;

/** A call's failure, with its gRPC status. */
export class GrpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
    this.name = 'GrpcError';
  }
}

/** Where a call's message starts in its bytes, after the gRPC message header (a flag and a length). */
export const MESSAGE_START = 5;

/** How a unary call is answered, once: whatever comes after the first is ignored. */
export interface UnaryReply {
  /** Sends one message (header included), then the OK status. */
  answer(message: Buffer): void;
  /** Ends the call with the error's status if a GrpcError, else UNKNOWN, as grpc-go answers a plain error. */
  failWith(error: unknown): void;
}

/**
 * A unary method: answers a request through `reply` by `deadline` (a performance.now() time,
 * Infinity without one); throwing is failing with that error. `request` is the call's bytes, its
 * message from MESSAGE_START on. No promise or closure is made per call for the method (see onEnd).
 */
export interface UnaryMethod {
  readonly kind: 'unary';
  answer(request: Buffer, deadline: number, reply: UnaryReply): void;
}

/** A call of a server-streaming method, open until the method ends it or the client goes. */
export interface ServerStream {
  /** Sends one message (header included). */
  write(message: Buffer): void;
  /** Ends the call with this status. */
  end(code: number, message?: string): void;
  /** Called once when the call ends, by either side. */
  onEnd(listener: () => void): void;
}

/** A server-streaming method: takes a request's message, then writes to the call as it likes. */
export interface StreamingMethod {
  readonly kind: 'server-streaming';
  start(request: Buffer, call: ServerStream): void;
}

export type Method = UnaryMethod | StreamingMethod;

/** grpc-go's and grpc-js's default: a larger request is refused with RESOURCE_EXHAUSTED. */
const MOST_REQUEST_BYTES = 4 * 1024 * 1024;
// Spec: "positive integer as ASCII string of at most 8 digits", in these units.
const TIMEOUT = /^(\d{1,8})([HMSmun])$/;
const TIMEOUT_MS: Readonly<Record<string, number>> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 };
const GRPC_CONTENT_TYPE = /^application\/grpc(\+proto)?(;|$)/;

const RESPONSE_HEADERS = { ':status': 200, 'content-type': 'application/grpc' } as const;
const WITH_TRAILERS = { waitForTrailers: true, sendDate: false } as const;
const ALONE = { endStream: true, sendDate: false } as const;
const OK_TRAILERS = { 'grpc-status': '0' } as const;

/** grpc-message is percent-encoded: every byte outside printable ASCII, and '%' itself. */
function percentEncoded(message: string): string {
  if (/^[\x20-\x24\x26-\x7e]*$/.test(message)) return message;
  let encoded = '';
  for (const byte of Buffer.from(message, 'utf8'))
    encoded +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  return encoded;
}

function statusTrailers(code: number, message: string): Record<string, string> {
  return message === ''
    ? { 'grpc-status': String(code) }
    : { 'grpc-status': String(code), 'grpc-message': percentEncoded(message) };
}

function ignore(): void {}

/**
 * Ends a call that has sent nothing with trailers alone (a Trailers-Only response), and asks the
 * client to stop sending (RST_STREAM NO_ERROR, once the answer is out) if it still is.
 */
function refuse(stream: ServerHttp2Stream, code: number, message: string, httpStatus = 200, extra = {}): void {
  if (stream.closed || stream.destroyed || stream.headersSent) return;
  stream.respond({ ...RESPONSE_HEADERS, ':status': httpStatus, ...extra, ...statusTrailers(code, message) }, ALONE);
  if (!stream.readableEnded) stream.close(constants.NGHTTP2_NO_ERROR);
}

// A client sends the same grpc-timeout on every call (Envoy: its filter's `timeout`), so the calls
// of one value fall due in the order they came: one queue and timer each (see Deadlines), for up
// to this many values; a call of another value gets a queue of its own.
const MOST_TIMEOUTS = 64;

/** The deadlines of the calls of each grpc-timeout value; throws GrpcError for a malformed one. */
function deadlinesOf(byTimeout: Map<string, Deadlines>, timeout: string): Deadlines {
  let deadlines = byTimeout.get(timeout);
  if (deadlines !== undefined) return deadlines;
  const parsed = TIMEOUT.exec(timeout);
  if (parsed === null) throw new GrpcError(Status.INTERNAL, `malformed grpc-timeout: ${JSON.stringify(timeout)}`);
  deadlines = new Deadlines(Number(parsed[1]) * (TIMEOUT_MS[parsed[2] as string] as number));
  if (byTimeout.size < MOST_TIMEOUTS) byTimeout.set(timeout, deadlines);
  return deadlines;
}

/**
 * Checks a call's headers as grpc-go does; throws GrpcError with the HTTP status to answer with.
 * Answers its method.
 */
function methodOf(methods: ReadonlyMap<string, Method>, headers: IncomingHttpHeaders): Method {
  const contentType = headers['content-type'];
  if (contentType !== 'application/grpc' && (contentType === undefined || !GRPC_CONTENT_TYPE.test(contentType)))
    throw Object.assign(
      new GrpcError(Status.INTERNAL, `content-type must be application/grpc; got ${JSON.stringify(contentType)}`),
      { httpStatus: 415 },
    );
  if (headers[':method'] !== 'POST')
    throw Object.assign(new GrpcError(Status.INTERNAL, `:method must be POST; got ${headers[':method']}`), {
      httpStatus: 405,
    });
  const path = headers[':path'] ?? '';
  const method = methods.get(path);
  if (method !== undefined) return method;
  const [, service, name] = /^\/([^/]+)\/([^/]+)$/.exec(path) ?? [];
  if (service === undefined)
    throw new GrpcError(Status.UNIMPLEMENTED, `malformed method name: ${JSON.stringify(path)}`);
  const known = [...methods.keys()].some((p) => p.startsWith(`/${service}/`));
  throw new GrpcError(
    Status.UNIMPLEMENTED,
    known ? `unknown method ${name} for service ${service}` : `unknown service ${service}`,
  );
}

/**
 * A call being read, then answered. It is kept on its stream, so that the stream's listeners are
 * shared functions, and in its grpc-timeout's queue while it has a deadline.
 */
class Call implements Pending, UnaryReply {
  /** The request's bytes so far (most requests come in one chunk), and how many. */
  received: Buffer | Buffer[] | undefined;
  size = 0;
  /** The request message's length, once its header is read. */
  length: number | undefined;
  /** Its deadline (a performance.now() time), set by its queue; Infinity without one. */
  due = Infinity;
  /** Answered, failed or past its deadline: nothing more is sent. */
  done = false;
  trailers: Record<string, string> = OK_TRAILERS;

  constructor(
    readonly stream: ServerHttp2Stream,
    readonly method: Method,
    private readonly deadlines: Deadlines | undefined,
    readonly encoding: string | undefined,
  ) {
    deadlines?.add(this);
  }

  /** Marks the call done; false if it already was. */
  private settle(): boolean {
    if (this.deadlines !== undefined) return this.deadlines.finish(this);
    if (this.done) return false;
    this.done = true;
    return true;
  }

  /** Sends a unary call's answer, unless the call is done. */
  answer(message: Buffer): void {
    if (!this.settle()) return;
    const { stream } = this;
    if (stream.closed || stream.destroyed) return;
    stream.respond(RESPONSE_HEADERS, WITH_TRAILERS);
    stream.end(message);
  }

  /** Ends the call with a status, unless it is done (see end). */
  finish(code: number, message: string, extra?: Record<string, string>): void {
    if (this.settle()) this.end(code, message, extra);
  }

  /** Called by the queue, which has marked the call done, at its deadline. */
  timedOut(): void {
    this.end(Status.DEADLINE_EXCEEDED, 'deadline exceeded');
  }

  /**
   * Ends the call with a status: in its trailers after what it sent, or in trailers alone when it
   * sent nothing. `extra`: more fields for trailers alone.
   */
  private end(code: number, message: string, extra?: Record<string, string>): void {
    const { stream } = this;
    if (!stream.headersSent) return refuse(stream, code, message, 200, extra);
    this.trailers = statusTrailers(code, message);
    if (!stream.closed && !stream.destroyed) stream.end();
  }

  failWith(error: unknown): void {
    if (error instanceof GrpcError) this.finish(error.code, error.message);
    else this.finish(Status.UNKNOWN, error instanceof Error ? error.message : String(error));
  }

  /** The request's bytes, in one buffer. */
  bytes(): Buffer {
    const { received } = this;
    if (received === undefined) return Buffer.alloc(0);
    return Array.isArray(received) ? (this.received = Buffer.concat(received)) : received;
  }

  /** Reads the request message's header once it is here; fails the call for one sluice does not read. */
  readHeader(): void {
    const header = this.bytes();
    const flag = header[0] as number;
    if (flag === 1) {
      if (this.encoding === undefined || this.encoding === 'identity')
        return this.finish(Status.INTERNAL, 'grpc: compressed flag set with identity or empty encoding');
      // compression.md: a message in an encoding the server does not support is UNIMPLEMENTED, and
      // the answer says which it accepts.
      return this.finish(
        Status.UNIMPLEMENTED,
        `grpc: Decompressor is not installed for grpc-encoding "${this.encoding}"`,
        { 'grpc-accept-encoding': 'identity' },
      );
    }
    if (flag !== 0) return this.finish(Status.INTERNAL, `grpc: received unexpected payload format ${flag}`);
    const length = header.readUInt32BE(1);
    if (length > MOST_REQUEST_BYTES)
      return this.finish(
        Status.RESOURCE_EXHAUSTED,
        `grpc: received message larger than max (${length} vs. ${MOST_REQUEST_BYTES})`,
      );
    this.length = length;
  }
}

const CALL = Symbol('call');
type CallStream = ServerHttp2Stream & { [CALL]: Call };

function onData(this: CallStream, chunk: Buffer): void {
  const call = this[CALL];
  if (call.done) return;
  const { received } = call;
  if (received === undefined) call.received = chunk;
  else if (Array.isArray(received)) received.push(chunk);
  else call.received = [received, chunk];
  call.size += chunk.length;
  if (call.length === undefined && call.size >= 5) call.readHeader();
  if (call.length !== undefined && call.size > 5 + call.length)
    call.finish(Status.INTERNAL, 'grpc: the call sent more than one request message');
}

function onEnd(this: CallStream): void {
  const call = this[CALL];
  if (call.done) return;
  if (call.length === undefined || call.size !== 5 + call.length)
    return call.finish(Status.INTERNAL, 'grpc: the call ended without a whole request message');
  if (performance.now() >= call.due) return call.finish(Status.DEADLINE_EXCEEDED, 'deadline exceeded');
  const request = call.bytes();
  if (call.method.kind === 'server-streaming')
    return startStreaming(call, call.method, request.subarray(MESSAGE_START));
  try {
    call.method.answer(request, call.due, call);
  } catch (error) {
    call.failWith(error);
  }
}

function onWantTrailers(this: CallStream): void {
  this.sendTrailers(this[CALL].trailers);
}

function startStreaming(call: Call, method: StreamingMethod, request: Buffer): void {
  const { stream } = call;
  stream.respond(RESPONSE_HEADERS, WITH_TRAILERS);
  try {
    method.start(request, {
      write(message) {
        if (!call.done && !stream.closed && !stream.destroyed) stream.write(message);
      },
      end: (code, message = '') => call.finish(code, message),
      onEnd: (listener) => void stream.once('close', listener),
    });
  } catch (error) {
    call.failWith(error);
  }
}

/** The server's state that calls share: its methods, and the deadlines of each grpc-timeout. */
interface Served {
  readonly methods: ReadonlyMap<string, Method>;
  readonly byTimeout: Map<string, Deadlines>;
}

function onStream(served: Served, stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
  // A client's RST_STREAM with an error code arrives as an error on the stream; the call just ends.
  stream.on('error', ignore);
  let method: Method;
  let deadlines: Deadlines | undefined;
  try {
    method = methodOf(served.methods, headers);
    const timeout = headers['grpc-timeout'] as string | undefined;
    deadlines = timeout === undefined ? undefined : deadlinesOf(served.byTimeout, timeout);
  } catch (error) {
    const { code, message, httpStatus } = error as GrpcError & { httpStatus?: number };
    return refuse(stream, code, message, httpStatus);
  }
  const call = new Call(stream, method, deadlines, headers['grpc-encoding'] as string | undefined);
  (stream as CallStream)[CALL] = call;
  stream.on('data', onData);
  stream.on('end', onEnd);
  stream.on('wantTrailers', onWantTrailers);
}

/** A gRPC server on node:http2, and its open connections (to close them on stop). */
export interface GrpcServer {
  readonly server: Http2Server | Http2SecureServer;
  readonly port: number;
  readonly sessions: Set<ServerHttp2Session>;
}

/**
 * Starts serving `methods` (by path, /package.Service/Method) on `host:port` (0: any free port);
 * with `tls`, over TLS (ALPN h2). Everything past the server's creation is per session and stream.
 */
export async function startGrpc(
  methods: ReadonlyMap<string, Method>,
  host: string,
  port: number,
  tls?: TlsOptions,
): Promise<GrpcServer> {
  const server = tls === undefined ? createServer() : createSecureServer(tls);
  const sessions = new Set<ServerHttp2Session>();
  server.on('session', (session: ServerHttp2Session) => {
    sessions.add(session);
    session.on('close', () => sessions.delete(session));
    // A connection that breaks, or breaks the protocol, is closed by nghttp2; its calls end with it.
    session.on('error', ignore);
  });
  const served: Served = { methods, byTimeout: new Map() };
  server.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => onStream(served, stream, headers));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return { server, port: (server.address() as AddressInfo).port, sessions };
}

/**
 * Stops taking connections, tells each client to open no more calls (GOAWAY), and resolves once
 * the calls in flight are answered. Streaming calls must be ended by their methods.
 */
export function stopGrpc({ server, sessions }: GrpcServer): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    for (const session of sessions) session.close();
  });
}
