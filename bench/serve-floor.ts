/**
 * The transport floor of bench/serve.ts: servers that answer every call with one constant answer,
 * prepared at start, and decide nothing. What such a server spends per call is what a service on
 * that transport spends before it decides anything, so 1,000,000 over it bounds the decisions/s
 * one Node process can serve there.
 *
 * Each runs in a process of its own (this module, forked by startFloorServer; the Go one, built and
 * spawned), asked by the same load processes and measured as `sluice serve` is:
 * - `go`: grpc-go (bench/go-floor/main.go), what a Go service such as envoyproxy/ratelimit spends
 *   on gRPC: the cost target's reference.
 * - `grpc-js`: @grpc/grpc-js with src/serve/proto, the server `sluice serve` ran before it had its
 *   own gRPC; protobufjs decodes each request and encodes the answer.
 * - `http2`: node:http2 answering every stream as gRPC by hand: fixed headers, a message encoded
 *   at start, `grpc-status: 0` in the trailers; no gRPC library and no codec on a call's path, and
 *   node:http2's options as `sluice serve` sets them. The cheapest gRPC a Node process serves.
 * - `http`: node:http, keep-alive, answering POST /json with a constant body, as `sluice serve`'s
 *   HTTP port does.
 * Each reads a call's whole request before it answers, as a server that decides must; the last two
 * leave it unparsed.
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttp2Server, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo, Server } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { rateLimitService } from '../test/support/rls.js';

export type FloorKind = 'go' | 'grpc-js' | 'http2' | 'http';

/** The floor servers, in the order the bench measures and reports them, with what each one is. */
// In the order a round measures them after the service: node:http2 first, next to the service on the memory store.
export const FLOOR_KINDS: Readonly<Record<FloorKind, string>> = {
  http2: 'bare node:http2, gRPC by hand',
  go: 'bare grpc-go',
  'grpc-js': 'bare @grpc/grpc-js',
  http: 'bare node:http, /json',
};

/** A floor server's process: its pid (to read its CPU time), its port, and how to stop it. */
export interface FloorServer {
  readonly kind: FloorKind;
  readonly pid: number | undefined;
  readonly port: number;
  stop(): Promise<void>;
}

/** Starts a floor server; undefined for the Go one where there is no `go`. */
export async function startFloorServer(kind: FloorKind): Promise<FloorServer | undefined> {
  if (kind === 'go') return startGoFloor();
  const child = fork(new URL(import.meta.url), [kind], { execArgv: ['--import', 'tsx'] });
  const [port] = (await Promise.race([
    once(child, 'message'),
    once(child, 'exit').then(([code]) => {
      throw new Error(`floor server ${kind}: its process exited with ${String(code)} before it listened`);
    }),
  ])) as [number];
  return { kind, pid: child.pid, port, stop: () => stopChild(child) };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  await once(child, 'exit');
}

const GO_SOURCE = fileURLToPath(new URL('./go-floor/', import.meta.url));
const GO_BUILD_DIR = join(tmpdir(), 'sluice-bench-go-floor');

/**
 * Builds bench/go-floor with Debian's Go and grpc-go (golang-go, golang-google-grpc-dev), in GOPATH
 * mode: nothing is downloaded. Resolves with the binary, or undefined when there is no `go`.
 */
async function buildGoFloor(): Promise<string | undefined> {
  const binary = join(GO_BUILD_DIR, 'go-floor');
  const env = {
    ...process.env,
    GO111MODULE: 'off',
    GOPATH: process.env.GOPATH ?? '/usr/share/gocode',
    GOCACHE: join(GO_BUILD_DIR, 'cache'),
  };
  const go = spawn('go', ['build', '-o', binary, '.'], { cwd: GO_SOURCE, env, stdio: ['ignore', 'ignore', 'pipe'] });
  let errors = '';
  go.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()));
  // No `go` to run: an 'error' (ENOENT) and no exit.
  const code = await new Promise<number | null | undefined>((resolve, reject) => {
    go.once('error', (error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? resolve(undefined) : reject(error)));
    go.once('exit', resolve);
  });
  if (code === undefined) return undefined;
  if (code !== 0) throw new Error(`go build of bench/go-floor failed (exit ${code}):\n${errors}`);
  return binary;
}

async function startGoFloor(): Promise<FloorServer | undefined> {
  const binary = await buildGoFloor();
  if (binary === undefined) return undefined;
  const child = spawn(binary, [answerMessage().subarray(5).toString('hex')], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    let text = '';
    child.stdout.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      if (text.includes('\n')) resolve(Number(text.trim()));
    });
    child.once('exit', (code) => reject(new Error(`go-floor exited with ${String(code)} before it listened`)));
  });
  return { kind: 'go', pid: child.pid, port, stop: () => stopChild(child) };
}

// What `sluice serve` answers for bench/serve.ts's rule (1,000,000,000 an hour) to a call it allows,
// in the form grpc-js takes (the service's loader options: camelCase fields, enums by name).
const LIMIT = 1_000_000_000;
const ANSWER = {
  overallCode: 'OK',
  statuses: [
    {
      code: 'OK',
      currentLimit: { requestsPerUnit: LIMIT, unit: 'HOUR' },
      limitRemaining: LIMIT - 1,
      durationUntilReset: { seconds: 1800, nanos: 500_000_000 },
    },
  ],
};
// The same answer in proto3's JSON mapping, where a Duration is a string of seconds.
const ANSWER_JSON = Buffer.from(
  JSON.stringify({
    ...ANSWER,
    statuses: ANSWER.statuses.map((status) => ({ ...status, durationUntilReset: '1800.500s' })),
  }),
);

function listenGrpcJs(): Promise<number> {
  // As src/serve/grpc.ts starts it: channelz would time every call.
  const server = new grpc.Server({ 'grpc.enable_channelz': 0 });
  const service = rateLimitService() as unknown as { service: grpc.ServiceDefinition };
  server.addService(service.service, {
    ShouldRateLimit(_call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) {
      callback(null, ANSWER);
    },
  });
  return new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, port) =>
      error ? reject(error) : resolve(port),
    ),
  );
}

/** A gRPC message as the wire carries it: not compressed (0), its length, its protobuf. */
function grpcMessage(protobuf: Buffer): Buffer {
  const header = Buffer.alloc(5);
  header.writeUInt32BE(protobuf.length, 1);
  return Buffer.concat([header, protobuf]);
}

/** The answer as a gRPC message; grpc-js's serializer encodes it, once. */
function answerMessage(): Buffer {
  const definition = rateLimitService() as unknown as {
    service: { ShouldRateLimit: { responseSerialize(value: unknown): Buffer } };
  };
  return grpcMessage(definition.service.ShouldRateLimit.responseSerialize(ANSWER));
}

// As src/serve/grpc.ts answers: trailers to follow, no date header (which @types/node does not list).
const RESPOND = { waitForTrailers: true, sendDate: false };

function listenHttp2(): Promise<number> {
  const message = answerMessage();
  const server = createHttp2Server();
  server.on('stream', (stream: ServerHttp2Stream) => {
    stream.on('end', () => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, RESPOND);
      stream.end(message);
    });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    stream.resume();
  });
  return listen(server);
}

function listenHttp(): Promise<number> {
  const server = createHttpServer((req, res) => {
    req.on('end', () => {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': ANSWER_JSON.length });
      res.end(ANSWER_JSON);
    });
    req.resume();
  });
  return listen(server);
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

const LISTEN: Record<Exclude<FloorKind, 'go'>, () => Promise<number>> = {
  'grpc-js': listenGrpcJs,
  http2: listenHttp2,
  http: listenHttp,
};

const asked = process.argv[2];
if (process.send !== undefined && asked !== undefined && asked in LISTEN) {
  process.send(await LISTEN[asked as keyof typeof LISTEN]());
  // The bench stops a floor server with SIGTERM, or by going away.
  process.once('disconnect', () => process.exit(0));
}
