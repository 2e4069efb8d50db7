import { writeFile } from 'node:fs/promises';
import { REDIS_HELP, redisOption, redisUrlOf, type Command } from '../command.js';
import { runDemo } from '../demo.js';
import { renderEdgeReport } from '../report.js';

export const demo: Command = {
  name: 'demo',
  summary: 'show, live, where the hand-written limiter breaks and what sluice does instead',
  help: `Usage: sluice demo [options]

Runs a hand-written INCR+EXPIRE limiter into its classic bug, then shows sluice's answers:
a 429 with Retry-After, the window-edge burst of a fixed window against a sliding log, a token bucket.
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
    const timelines = await runDemo({ redisUrl: redisUrlOf(parsed, io), print: io.out });
    if (typeof html === 'string') {
      await writeFile(html, renderEdgeReport(timelines));
      io.out(`report written to ${html}`);
    }
    return 0;
  },
};
