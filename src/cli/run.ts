import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import { SluiceError, messageOf } from '../core/errors.js';
import { EXIT, RedisRequiredError, UsageError, type CliIo, type Command } from './command.js';
import { bench } from './commands/bench.js';
import { demo } from './commands/demo.js';
import { inspect } from './commands/inspect.js';
import { reset } from './commands/reset.js';
import { serve } from './commands/serve.js';
import { top } from './commands/top.js';

const COMMANDS: readonly Command[] = [demo, inspect, reset, bench, serve, top];

const HELP = `Usage: sluice <command> [options]

Commands:
${COMMANDS.map((command) => `  ${command.name.padEnd(9)} ${command.summary}`).join('\n')}

Run sluice <command> --help for a command's options and examples; sluice --version (-V) prints the version.

Examples:
  sluice demo --html report.html
  sluice inspect user:42 --policy fixed-window:100/1m --json
  sluice reset user:42 --redis redis://127.0.0.1:6379
  sluice serve --config ratelimit.yaml --redis redis://127.0.0.1:6379 --dashboard
  sluice top --url http://127.0.0.1:8080/dashboard

Exit codes: 0 done, 1 failed (e.g. Redis unreachable), 2 bad usage, 3 no Redis given (--redis or REDIS_URL).`;

/** The installed package's version, read from its package.json by the package's own name. */
function version(): string {
  return (createRequire(import.meta.url)('sluice/package.json') as { version: string }).version;
}

function exitCodeOf(error: unknown): number {
  if (error instanceof UsageError) return EXIT.usage;
  if (error instanceof RedisRequiredError) return EXIT.noRedis;
  // The library's own validation (a key, a cost) is a usage mistake here too.
  if (error instanceof SluiceError && error.code !== 'SLUICE_STORE_ERROR') return EXIT.usage;
  return EXIT.failed;
}

function oneLine(error: unknown): string {
  const line = messageOf(error).replace(/\s*\n\s*/g, ' ');
  return line.startsWith('sluice') ? line : `sluice: ${line}`;
}

async function runCommand(command: Command, args: readonly string[], io: CliIo): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...args],
      allowPositionals: true,
      options: { ...command.options, help: { type: 'boolean', short: 'h' } },
    });
  } catch (error) {
    // parseArgs's first sentence names the unknown option or the one missing its value; the rest is advice about '--'.
    const [problem] = (error as Error).message.split('. ');
    throw new UsageError(`sluice ${command.name}: ${problem}; see sluice ${command.name} --help`);
  }
  if (parsed.values.help) {
    io.out(command.help);
    return EXIT.ok;
  }
  return command.run(parsed, io);
}

/** Runs `sluice <argv>` and resolves with its exit code; every failure is one line on io.err. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const [name, ...args] = argv;
  if (name === '--help' || name === '-h') {
    io.out(HELP);
    return EXIT.ok;
  }
  if (name === '--version' || name === '-V') {
    io.out(version());
    return EXIT.ok;
  }
  if (name === undefined) {
    io.err(HELP);
    return EXIT.usage;
  }
  const command = COMMANDS.find((candidate) => candidate.name === name);
  try {
    if (!command)
      throw new UsageError(
        `sluice: unknown command ${JSON.stringify(name)}; the commands are ${COMMANDS.map((c) => c.name).join(', ')} (see sluice --help)`,
      );
    return await runCommand(command, args, io);
  } catch (error) {
    io.err(oneLine(error));
    return exitCodeOf(error);
  }
}
