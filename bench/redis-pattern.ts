import { connect, type Socket } from 'node:net';
import type { Decide } from './measure.js';

/**
 * envoyproxy/ratelimit's Redis traffic for a request of one descriptor limited per hour, replayed
 * (its src/redis/fixed_cache_impl.go, read, not copied): a pipeline of `INCRBY <key> <hits>` and
 * `EXPIRE <key> <unit's seconds>` on the key of the window, sent per request, over a pool of
 * connections each carrying one request's pipeline at a time, a request waiting while all are busy
 * (its src/redis/driver_impl.go: radix's fixed pool, which blocks when full; no write buffering, its
 * default). Its key is `<domain>_<key>_<value>_<window start>`.
 *
 * Written by hand over node:net, requests prepared once per key, so that the replay costs the
 * machine little besides what Redis spends, which is what it measures.
 */
export interface PatternClient {
  readonly decide: Decide;
  close(): void;
}

const HOUR_SECONDS = 3600;

function bulk(text: string): string {
  return `$${Buffer.byteLength(text)}\r\n${text}\r\n`;
}

function command(...parts: string[]): string {
  return `*${parts.length}\r\n${parts.map(bulk).join('')}`;
}

/** One connection, one pipeline at a time: it settles once both replies (integers) are read. */
function connection(port: number) {
  const socket: Socket = connect(port, '127.0.0.1').setNoDelay(true);
  let waiting: { resolve(): void; reject(error: Error): void; replies: number } | undefined;
  let partial = '';
  socket.on('data', (chunk: Buffer) => {
    const text = partial + chunk.toString('latin1');
    const lines = text.split('\r\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      const call = waiting;
      if (call === undefined) continue;
      if (!line.startsWith(':')) {
        waiting = undefined;
        call.reject(new Error(`Redis answered ${line}`));
      } else if (--call.replies === 0) {
        waiting = undefined;
        call.resolve();
      }
    }
  });
  const fail = (error: Error) => {
    waiting?.reject(error);
    waiting = undefined;
  };
  socket.on('error', fail);
  socket.on('close', () => fail(new Error('Redis closed the connection')));
  return {
    send: (pipeline: Buffer) =>
      new Promise<void>((resolve, reject) => {
        waiting = { resolve, reject, replies: 2 };
        socket.write(pipeline);
      }),
    close: () => socket.destroy(),
  };
}

/** The pattern for domain `domain`, descriptor key `key`, over `connections` connections to Redis on `port`. */
export function patternClient(
  port: number,
  domain: string,
  key: string,
  keys: readonly string[],
  connections: number,
): PatternClient {
  const windowStart = Math.floor(Date.now() / 1000 / HOUR_SECONDS) * HOUR_SECONDS;
  const pipelines = new Map(
    keys.map((value) => {
      const cacheKey = `${domain}_${key}_${value}_${windowStart}`;
      return [
        value,
        Buffer.from(command('INCRBY', cacheKey, '1') + command('EXPIRE', cacheKey, String(HOUR_SECONDS)), 'latin1'),
      ];
    }),
  );
  const pool = Array.from({ length: connections }, () => connection(port));
  const idle = [...pool];
  const queued: (() => void)[] = [];
  async function withConnection(pipeline: Buffer): Promise<void> {
    let free = idle.pop();
    while (free === undefined) {
      await new Promise<void>((resolve) => queued.push(resolve));
      free = idle.pop();
    }
    try {
      await free.send(pipeline);
    } finally {
      idle.push(free);
      queued.shift()?.();
    }
  }
  return {
    decide: (value) => withConnection(pipelines.get(value) as Buffer),
    close: () => pool.forEach((c) => c.close()),
  };
}
