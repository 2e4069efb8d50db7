import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A private redis-server on a free loopback port, for the demo and the tests. */
export interface RedisServer {
  readonly port: number;
  readonly url: string;
  /** Kills the server at once (SIGKILL), as a crash would; clients see their connection drop. */
  kill(): Promise<void>;
  /** Starts the server again on the same port and directory (killing it first if it still runs). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** Thrown when there is no `redis-server` (or the server command given) on PATH. */
export class RedisServerMissingError extends Error {
  constructor(command = 'redis-server') {
    super(`${command} was not found on PATH`);
    this.name = 'RedisServerMissingError';
  }
}

/** A TCP port free on 127.0.0.1 right now (another process may take it before it is used). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

// A server says the first when it serves; a sentinel, which never does, the second once it runs.
const READY = /Ready to accept connections|Sentinel ID is/;

function waitUntilReady(child: ChildProcess, command: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => fail(new Error(`${command} did not start within 10 s:\n${output}`)), 10_000);
    function fail(error: Error) {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(error);
    }
    child.once('error', (error: NodeJS.ErrnoException) =>
      fail(error.code === 'ENOENT' ? new RedisServerMissingError(command) : error),
    );
    child.once('exit', (code) => fail(new Error(`${command} exited with code ${code}:\n${output}`)));
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (READY.test(output)) {
        clearTimeout(timer);
        child.removeAllListeners('exit');
        child.stdout?.removeAllListeners('data');
        child.stdout?.resume();
        resolve();
      }
    });
  });
}

function launch(
  command: string,
  port: number,
  dir: string,
  args: readonly string[],
  config: readonly string[],
): { child: ChildProcess; ready: Promise<void> } {
  const child = spawn(
    command,
    [
      ...config,
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      ...args,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  return { child, ready: waitUntilReady(child, command) };
}

/** Resolves once `child` has exited, sending it `signal` if it still runs. */
export function exited(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const done = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(signal);
  return done;
}

/**
 * Starts redis-server (or `command`, e.g. a valkey-server's path) with nothing persisted, in a
 * temporary directory removed on stop. `args` are extra server options, e.g. ['--cluster-enabled', 'yes'].
 * With `sentinel`, it runs as a Sentinel (`args` then say what it monitors, e.g. ['--sentinel', 'monitor', ...]),
 * from a config file in that directory, which a Sentinel needs to record what it learns; a restart keeps it.
 */
export async function startRedisServer(
  args: readonly string[] = [],
  options: { sentinel?: boolean; command?: string } = {},
): Promise<RedisServer> {
  const command = options.command ?? 'redis-server';
  // Another process may take the free port between our probe and redis-server's bind: try again.
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const dir = await mkdtemp(join(tmpdir(), 'sluice-redis-'));
    const config = options.sentinel ? [join(dir, 'sentinel.conf'), '--sentinel'] : [];
    if (options.sentinel) await writeFile(join(dir, 'sentinel.conf'), '');
    let { child, ready } = launch(command, port, dir, args, config);
    try {
      await ready;
    } catch (error) {
      await rm(dir, { recursive: true, force: true });
      if (error instanceof RedisServerMissingError || attempt === 3) throw error;
      continue;
    }
    return {
      port,
      url: `redis://127.0.0.1:${port}`,
      kill: () => exited(child, 'SIGKILL'),
      async restart() {
        await exited(child, 'SIGKILL');
        ({ child, ready } = launch(command, port, dir, args, config));
        await ready;
      },
      async stop() {
        await exited(child, 'SIGTERM');
        await rm(dir, { recursive: true, force: true });
      },
    };
  }
}
