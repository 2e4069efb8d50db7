import type { ParseArgsConfig } from 'node:util';
import { InvalidOptionError } from '../core/errors.js';
import { validPrefix } from '../core/keys.js';

/** What the command writes to and reads from; tests pass their own. */
export interface CliIo {
  out(line: string): void;
  err(line: string): void;
  readonly env: NodeJS.ProcessEnv;
}

/** Exit codes, documented in docs/cli.md. */
export const EXIT = {
  ok: 0,
  /** The command ran and failed: Redis unreachable or erroring, a file not writable. */
  failed: 1,
  /** Bad usage: unknown command or option, a missing or invalid argument. */
  usage: 2,
  /** The command needs a Redis and neither --redis nor REDIS_URL names one. */
  noRedis: 3,
} as const;

/** A mistake in how the command was called. Its message is one line naming the bad argument. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** Thrown by a command that needs a Redis when none is configured. */
export class RedisRequiredError extends Error {
  constructor(command: string) {
    super(`sluice ${command}: needs a Redis; pass --redis redis://host:6379 or set REDIS_URL`);
    this.name = 'RedisRequiredError';
  }
}

export interface ParsedCommand {
  readonly values: Readonly<Record<string, string | boolean | undefined>>;
  readonly positionals: readonly string[];
}

/** One `sluice <name>` command: its own options, help text and behaviour. */
export interface Command {
  readonly name: string;
  /** One line for `sluice --help`. */
  readonly summary: string;
  /** The whole `sluice <name> --help` text: usage, options, examples. */
  readonly help: string;
  readonly options: NonNullable<ParseArgsConfig['options']>;
  run(parsed: ParsedCommand, io: CliIo): Promise<number>;
}

/** The option every command that talks to Redis shares, with its help line. */
export const redisOption = { redis: { type: 'string' } } as const;
export const REDIS_HELP = '--redis <url>      the Redis to use (default: $REDIS_URL)';

/** The Redis URL of --redis, else of REDIS_URL, with where it came from for messages; else undefined. */
export function redisUrlOf(parsed: ParsedCommand, io: CliIo): { url: string; source: string } | undefined {
  const flag = parsed.values.redis;
  if (typeof flag === 'string') return { url: flag, source: '--redis' };
  return io.env.REDIS_URL ? { url: io.env.REDIS_URL, source: 'REDIS_URL' } : undefined;
}

/** The one positional a command takes, or a UsageError naming it. */
export function onePositional(command: string, name: string, parsed: ParsedCommand): string {
  const [value, ...extra] = parsed.positionals;
  if (value === undefined || value === '')
    throw new UsageError(`sluice ${command}: missing <${name}>; see sluice ${command} --help`);
  if (extra.length > 0)
    throw new UsageError(
      `sluice ${command}: unexpected argument ${JSON.stringify(extra[0])}; see sluice ${command} --help`,
    );
  return value;
}

/**
 * Runs a library validation on a command-line value. The library's InvalidOptionError names its
 * own option ("limit", "prefix"); the UsageError says which flag the value came from.
 */
export function validFlag<T>(flag: string, value: string, validate: () => T): T {
  try {
    return validate();
  } catch (error) {
    if (!(error instanceof InvalidOptionError)) throw error;
    throw new UsageError(`sluice: ${flag} ${JSON.stringify(value)}: ${error.message.replace(/^sluice: /, '')}`);
  }
}

/** --prefix, checked before anything connects; undefined means the library's default. */
export function prefixOf(parsed: ParsedCommand): string | undefined {
  const prefix = parsed.values.prefix;
  return typeof prefix === 'string' ? validFlag('--prefix', prefix, () => validPrefix(prefix)) : undefined;
}
