import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { EXIT, REDIS_HELP, UsageError, redisOption, type Command } from '../command.js';

/** The root of the sluice repository clone we are in, where bench/ and the peers live. */
function repositoryRoot(): string | undefined {
  for (let dir = process.cwd(); dir !== dirname(dir); dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (!existsSync(manifest)) continue;
    const { name } = JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string };
    return name === 'sluice' && existsSync(join(dir, 'bench', 'run.ts')) ? dir : undefined;
  }
  return undefined;
}

export const bench: Command = {
  name: 'bench',
  summary: 'run the benchmark suite against the peers and write docs/benchmarks.md',
  help: `Usage: sluice bench [options]

Runs the benchmark suite (npm run bench, which builds first): sluice's algorithms beside rate-limiter-flexible,
@upstash/ratelimit and ioredis's INCR ceiling, against a redis-server it starts itself, then its
middleware behind Express, Fastify and node:http beside the peers' under autocannon, with a
progress line; prints the ratios and writes docs/benchmarks.md and docs/benchmarks.svg.
Run it inside a clone of the sluice repository after npm ci, where the peers are installed.

Options:
  --quick            small counts: checks that everything runs, measures nothing worth quoting
  ${REDIS_HELP.replace('(default: $REDIS_URL)', '(default: a private redis-server; flushes it)')}
  -h, --help         show this help

Examples:
  sluice bench
  sluice bench --quick`,
  options: { quick: { type: 'boolean' }, ...redisOption },
  async run(parsed) {
    const root = repositoryRoot();
    if (root === undefined) {
      throw new UsageError(
        'sluice bench: run it inside a clone of the sluice repository after npm ci (bench/run.ts and the peers are not in the package)',
      );
    }
    // As npm run bench does: build first, so the bench measures the package as it ships.
    const args = ['run', 'bench', '--'];
    if (parsed.values.quick === true) args.push('--quick');
    if (typeof parsed.values.redis === 'string') args.push('--redis', parsed.values.redis);
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn(process.platform === 'win32' ? 'npm.cmd' : 'npm', args, { cwd: root, stdio: 'inherit' });
      child.once('error', reject);
      child.once('exit', resolve);
    });
    return code === 0 ? EXIT.ok : EXIT.failed;
  },
};
