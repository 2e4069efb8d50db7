import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { runCli } from '../../src/cli/run.js';
import { createLimiter, redisStore, type Policy } from '../../src/index.js';

/** What a run of the sluice command did: its exit code and the lines it printed. */
export interface Run {
  code: number;
  out: string[];
  err: string[];
}

/** Runs the sluice command in this process, as the bin would with `argv` and `env`. */
export async function sluice(argv: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(argv, { out: (line) => out.push(line), err: (line) => err.push(line), env });
  return { code, out, err };
}

/** Runs a command that must succeed with --json and returns its parsed output. */
export async function sluiceJson(argv: string[], env: NodeJS.ProcessEnv = {}): Promise<Record<string, unknown>> {
  const run = await sluice([...argv, '--json'], env);
  assert.deepEqual({ code: run.code, err: run.err, lines: run.out.length }, { code: 0, err: [], lines: 1 });
  return JSON.parse(run.out[0] ?? '') as Record<string, unknown>;
}

/** A limiter on `redis` under `prefix`, writing what the command then reads. */
export function limiterOn(redis: Redis, prefix: string, policy: Policy) {
  return createLimiter({ store: redisStore(redis), prefix, policy });
}
