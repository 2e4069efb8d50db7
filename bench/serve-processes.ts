import { fork, spawn, type ChildProcessByStdio } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import type { Redis } from 'ioredis';
import type { LoadOrder, LoadReply } from './serve-load.js';

// The processes of bench/serve.ts: `sluice serve` itself, the load processes that ask it, and how
// much CPU time each has used.

// Linux counts a process's CPU time in clock ticks of 1/100 s (USER_HZ).
const TICKS_PER_SECOND = 100;

/**
 * The CPU time a process has used so far, in microseconds, from /proc; NaN elsewhere. With
 * `mainThread`, its main thread's alone (Linux gives it the process's id). With `children`, its
 * child processes' too (`sluice serve --workers`: the primary and every worker).
 */
export async function processCpuMicros(pid: number | undefined, mainThread = false, children = false): Promise<number> {
  if (children) {
    const pids = await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8').catch(() => '');
    const each = [pid, ...pids.split(' ').filter(Boolean).map(Number)];
    const times = await Promise.all(each.map((one) => processCpuMicros(one, mainThread)));
    return times.reduce((sum, time) => sum + time, 0);
  }
  try {
    const stat = await readFile(mainThread ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, 'utf8');
    // After the command's name (in parentheses, and it may hold spaces): utime and stime are the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / TICKS_PER_SECOND;
  } catch {
    return NaN;
  }
}

/** The CPU time Redis has used so far, in microseconds, from INFO. */
export async function redisCpuMicros(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const seconds = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return (seconds('used_cpu_sys') + seconds('used_cpu_user')) * 1e6;
}

export interface Load {
  order(order: LoadOrder): Promise<LoadReply>;
  stop(): void;
}

const LATE_MS = 30_000;

/** `count` load-generating processes (bench/serve-load.ts), each ready for orders. */
export function startLoads(count: number): Promise<Load[]> {
  const script = new URL('./serve-load.ts', import.meta.url);
  return Promise.all(
    Array.from({ length: count }, async (): Promise<Load> => {
      const child = fork(script, [], { execArgv: ['--import', 'tsx'], serialization: 'advanced' });
      await once(child, 'spawn');
      return {
        order: (order) =>
          new Promise((resolve, reject) => {
            // A call the service never answers would hold the run for ever: fail the bench instead.
            const late = setTimeout(
              () => reject(new Error(`load process: no answer ${LATE_MS} ms after its run should have ended`)),
              order.durationMs + LATE_MS,
            );
            child.once('message', (reply: LoadReply) => {
              clearTimeout(late);
              if (reply.error === undefined) resolve(reply);
              else reject(new Error(`load process: ${reply.error}`));
            });
            child.send(order);
          }),
        stop: () => child.disconnect(),
      };
    }),
  );
}

/** A `sluice serve` process of the built command, and its ports once it listens. */
export interface ServiceProcess {
  readonly child: ChildProcessByStdio<null, null, Readable>;
  readonly grpcPort: number;
  readonly httpPort: number;
  stop(): Promise<void>;
}

/** Starts `sluice serve --config <dir> ...flags` on free loopback ports; resolves once it counts (every worker serves). */
export async function startService(config: string, flags: readonly string[]): Promise<ServiceProcess> {
  const child = spawn(
    process.execPath,
    [
      'dist/esm/cli/main.js',
      'serve',
      '--config',
      config,
      '--grpc-port',
      '0',
      '--http-port',
      '0',
      '--host',
      '127.0.0.1',
      ...flags,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    await once(child, 'exit');
  };
  try {
    const ports = await new Promise<{ grpc: number; http: number }>((resolve, reject) => {
      let text = '';
      child.stderr.on('data', (chunk: Buffer) => {
        text += chunk.toString();
        const bound = /gRPC on 127\.0\.0\.1:(\d+), HTTP on 127\.0\.0\.1:(\d+)/.exec(text);
        if (bound && text.includes('sluice serve: counting in '))
          resolve({ grpc: Number(bound[1]), http: Number(bound[2]) });
      });
      child.once('exit', (code) => reject(new Error(`sluice serve exited with ${code}: ${text}`)));
    });
    return { child, grpcPort: ports.grpc, httpPort: ports.http, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
