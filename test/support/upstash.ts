import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis, ReplyError } from 'ioredis';

/** Upstash's REST API in front of a real redis-server, for @upstash/redis to talk to. */
export interface UpstashBridge {
  /** What @upstash/redis takes as `url` and `token`. */
  readonly url: string;
  readonly token: string;
  /** While on, requests get no answer, as an endpoint that stops answering; off, those held are dropped. */
  hold(on: boolean): void;
  stop(): Promise<void>;
}

type Command = [string, ...string[]];

/** A reply as JSON carries it: strings as base64 when the client asks (`Upstash-Encoding: base64`), else as text. */
function encoded(reply: unknown, base64: boolean): unknown {
  if (Buffer.isBuffer(reply)) return reply.toString(base64 ? 'base64' : 'utf8');
  if (Array.isArray(reply)) return reply.map((element) => encoded(element, base64));
  return reply;
}

function isCommand(value: unknown): value is Command {
  return (
    Array.isArray(value) &&
    value.length > 0 &&
    value.every((part) => typeof part === 'string' || typeof part === 'number')
  );
}

async function body(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

/**
 * Starts Upstash's REST protocol on a free loopback port, run by the redis-server on `redisPort` (as
 * the ACL user `login`, if given):
 * `POST /` with a command as a JSON array answers `{ result }`, or `{ error }` with HTTP 400 when
 * Redis refuses it (500 when Redis cannot be reached); `POST /pipeline` with an array of commands
 * answers an array of those, in order, with HTTP 200. Every request needs `Authorization: Bearer
 * <token>` (else 401). Strings in results are base64 when the request asks so, as @upstash/redis
 * does by default. Nothing else of the API (path-style commands, /multi-exec, streams) is served:
 * sluice's store sends EVALSHA and EVAL alone, which @upstash/redis may pipeline.
 */
export async function startUpstashBridge(
  redisPort: number,
  login?: { username: string; password: string },
): Promise<UpstashBridge> {
  const token = randomUUID();
  // A dead Redis fails each request at once, as a REST API answers rather than holds it. Nothing
  // but the requests' commands, as Upstash runs: no ready check (INFO) nor CLIENT SETINFO (Redis
  // 7.2 and later), which `login` may not be allowed.
  const redis = new Redis(redisPort, '127.0.0.1', {
    ...login,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    enableReadyCheck: false,
    disableClientInfo: true,
  });
  redis.on('error', () => undefined);
  await once(redis, 'ready');

  async function run(
    [name, ...args]: Command,
    base64: boolean,
  ): Promise<{ status: number; reply: { result: unknown } | { error: string } }> {
    try {
      return { status: 200, reply: { result: encoded(await redis.callBuffer(name, ...args.map(String)), base64) } };
    } catch (error) {
      return { status: error instanceof ReplyError ? 400 : 500, reply: { error: (error as Error).message } };
    }
  }

  async function answer(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const reply = (status: number, json: unknown) =>
      response.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(json));
    if (request.headers.authorization !== `Bearer ${token}`) return void reply(401, { error: 'Unauthorized' });
    const base64 = request.headers['upstash-encoding'] === 'base64';
    const sent = await body(request);
    if (request.method === 'POST' && request.url === '/' && isCommand(sent)) {
      const { status, reply: json } = await run(sent, base64);
      return void reply(status, json);
    }
    if (request.method === 'POST' && request.url === '/pipeline' && Array.isArray(sent) && sent.every(isCommand)) {
      // One connection runs them in the order sent.
      const replies = await Promise.all(sent.map((command) => run(command, base64)));
      return void reply(
        200,
        replies.map((r) => r.reply),
      );
    }
    reply(400, { error: `the bridge serves no ${request.method} ${request.url} with this body` });
  }

  let held: ServerResponse[] | undefined;
  const server = createServer((request, response) => {
    if (held) return void held.push(response);
    answer(request, response).catch((error: unknown) =>
      response.writeHead(400).end(JSON.stringify({ error: String(error) })),
    );
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    token,
    hold(on) {
      held?.forEach((response) => response.destroy());
      held = on ? [] : undefined;
    },
    stop: async () => {
      const closed = once(server, 'close');
      server.closeAllConnections();
      server.close();
      redis.disconnect();
      await closed;
    },
  };
}
