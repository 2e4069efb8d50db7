import { constants } from 'node:fs';
import { access, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { EXIT, REDIS_HELP, redisOption, redisUrlOf, type Command } from '../command.js';
import { parseRedisUrl } from '../connect.js';
import { runDemo } from '../demo.js';
import { renderEdgeReport } from '../report.js';

export const demo: Command = {
  name: 'demo',
  summary: 'show, live, where the hand-written limiter breaks and what sluice does instead',
  help: `Usage: sluice demo [options]

Runs a hand-written INCR+EXPIRE limiter into its classic bug (a crash leaves its key without a
TTL: the client is blocked forever), then shows sluice's answers in ten lines: a 429 with
Retry-After; requests sent 100 ms either side of a window edge through a fixed window, a sliding
log, GCRA and a sliding window; a token bucket; and a concurrency limit.
Without --redis or REDIS_URL it starts a private redis-server (or, without one on PATH, uses memory).

Options:
  ${REDIS_HELP}
  --html <file>      also write a self-contained HTML page picturing each algorithm's requests around
                     the window edge, with the trade-off table
  -h, --help         show this help

Examples:
  sluice demo
  sluice demo --html report.html
  sluice demo --redis redis://127.0.0.1:6379`,
  options: { html: { type: 'string' }, ...redisOption },
  async run(parsed, io) {
    const html = parsed.values.html;
    const redis = redisUrlOf(parsed, io);
    if (redis) parseRedisUrl(redis.url, redis.source);
    // Fail before the demo's seconds of waiting, not after, when the report cannot be written.
    if (typeof html === 'string') await access(dirname(html), constants.W_OK);
    const timelines = await runDemo({ redisUrl: redis?.url, print: (line) => io.out(line) });
    if (typeof html === 'string') {
      await writeFile(html, renderEdgeReport(timelines));
      io.out(`report written to ${html}`);
    }
    return EXIT.ok;
  },
};
