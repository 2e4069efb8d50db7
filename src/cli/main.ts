#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { runDemo } from './demo.js';

const HELP = `Usage: sluice <command> [options]

Commands:
  demo      show, live, where the hand-written limiter breaks and what sluice does instead

Options:
  --redis <url>   the Redis to use (default: $REDIS_URL; without either, demo starts a private redis-server)
  -h, --help      show this help

Examples:
  sluice demo
  sluice demo --redis redis://127.0.0.1:6379

Exit codes: 0 done, 1 failed, 2 bad usage.`;

async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { redis: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    });
  } catch (error) {
    console.error(`sluice: ${(error as Error).message}`);
    return 2;
  }
  const [command, ...rest] = parsed.positionals;
  if (parsed.values.help || command === undefined) {
    console.log(HELP);
    return command === undefined && !parsed.values.help ? 2 : 0;
  }
  if (command !== 'demo' || rest.length > 0) {
    console.error(`sluice: unknown command or argument "${[command, ...rest].join(' ')}"; see sluice --help`);
    return 2;
  }
  await runDemo({ redisUrl: parsed.values.redis ?? process.env.REDIS_URL });
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(`sluice: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  },
);
