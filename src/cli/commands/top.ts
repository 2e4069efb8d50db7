import type { DashboardSnapshot, HeavyHitter, SeriesSnapshot } from '../../index.js';
import { EXIT, UsageError, type CliIo, type Command, type ParsedCommand } from '../command.js';

const HELP = `Usage: sluice top --url <dashboard URL> [options]

Shows the top keys and the decision rates of a running dashboard (sluice serve --dashboard, or an
app's mounted one) in the terminal, refreshed every second until Ctrl-C. A bearer token comes from
$SLUICE_DASHBOARD_TOKEN.

Options:
  --url <url>          the dashboard's URL, e.g. http://127.0.0.1:8080/dashboard; required
  --top <n>            keys shown per table, 1 to 100 (default 10)
  --interval <s>       seconds between refreshes, 1 to 3600 (default 1)
  --json               print one snapshot as JSON and exit
  -h, --help           show this help

Examples:
  sluice top --url http://127.0.0.1:8080/dashboard
  sluice top --url http://127.0.0.1:3000/admin/limits --top 20 --json`;

// Home the cursor and clear the screen: each refresh draws the whole view again.
const CLEAR = '\x1b[H\x1b[2J';

function wholeNumber(parsed: ParsedCommand, flag: string, fallback: number, most: number): number {
  const value = parsed.values[flag];
  if (value === undefined) return fallback;
  const number = Number(value);
  if (typeof value !== 'string' || !/^\d+$/.test(value) || number < 1 || number > most)
    throw new UsageError(
      `sluice top: --${flag} must be a whole number from 1 to ${most}; got ${JSON.stringify(value)}`,
    );
  return number;
}

function dataUrl(parsed: ParsedCommand, top: number): URL {
  const given = parsed.values.url;
  if (typeof given !== 'string' || given === '')
    throw new UsageError('sluice top: missing --url, e.g. --url http://127.0.0.1:8080/dashboard');
  let url: URL;
  try {
    url = new URL(given);
  } catch {
    throw new UsageError(`sluice top: --url must be an http:// or https:// URL; got ${JSON.stringify(given)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new UsageError(`sluice top: --url must be an http:// or https:// URL; got ${JSON.stringify(given)}`);
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/data`;
  url.search = `?top=${top}`;
  return url;
}

async function fetchSnapshot(url: URL, token: string | undefined): Promise<DashboardSnapshot> {
  const response = await fetch(url, token ? { headers: { Authorization: `Bearer ${token}` } } : {});
  const text = await response.text();
  if (!response.ok) {
    let detail = text.slice(0, 200);
    try {
      detail = (JSON.parse(text) as { detail?: string }).detail ?? detail;
    } catch {
      // Not a problem body: its first characters say enough.
    }
    throw new Error(`sluice top: ${url.href} answered ${response.status}: ${detail}`);
  }
  return JSON.parse(text) as DashboardSnapshot;
}

const pad = (text: string | number, width: number, right = false): string => {
  const cell = String(text).slice(0, width);
  return right ? cell.padStart(width) : cell.padEnd(width);
};

/** The terminal's view of a snapshot: the rules' rates and totals, then the top keys by denials and by use. */
export function renderTop(snapshot: DashboardSnapshot, where: string, top: number): string[] {
  const at = snapshot.seconds - 2;
  const lastSecond = (s: SeriesSnapshot, o: 'admitted' | 'denied' | 'shadowDenied') => s.perSecond[o][at] ?? 0;
  const lines = [
    `sluice top  ${where}  ${new Date(snapshot.now).toISOString().slice(11, 19)} UTC  store ${snapshot.store.status}  keys ${snapshot.keys}`,
    '',
    `${pad('RULE OR POLICY', 32)} ${pad('ADM/S', 7, true)} ${pad('DEN/S', 7, true)} ${pad('SHD/S', 7, true)} ${pad('ADMITTED', 10, true)} ${pad('DENIED', 10, true)} ${pad('SHADOW', 10, true)}`,
  ];
  for (const s of snapshot.series)
    lines.push(
      `${pad(s.name, 32)} ${pad(lastSecond(s, 'admitted'), 7, true)} ${pad(lastSecond(s, 'denied'), 7, true)} ${pad(lastSecond(s, 'shadowDenied'), 7, true)} ${pad(s.total.admitted, 10, true)} ${pad(s.total.denied, 10, true)} ${pad(s.total.shadowDenied, 10, true)}`,
    );
  const table = (title: string, field: 'topDenied' | 'topUsed') => {
    const hits: { hit: HeavyHitter; name: string }[] = [];
    for (const s of snapshot.series) for (const hit of s[field]) hits.push({ hit, name: s.name });
    hits.sort((a, b) => b.hit.count - a.hit.count);
    lines.push(
      '',
      title,
      `${pad('KEY', 40)} ${pad('RULE OR POLICY', 24)} ${pad('COUNT', 10, true)} ${pad('±ERR', 8, true)}`,
    );
    for (const { hit, name } of hits.slice(0, top))
      lines.push(`${pad(hit.item, 40)} ${pad(name, 24)} ${pad(hit.count, 10, true)} ${pad(hit.error, 8, true)}`);
  };
  table('TOP KEYS BY DENIALS', 'topDenied');
  table('TOP KEYS BY USE', 'topUsed');
  const { exactPerSecond, oneIn } = snapshot.sampling;
  if (snapshot.series.some((s) => s.sampled.used > 0))
    lines.push(
      '',
      `Past ${exactPerSecond} decisions a second per rule, 1 in ${oneIn} is counted, weighted ${oneIn}: a count may also be off by about sqrt(${oneIn - 1} x count).`,
    );
  return lines;
}

/** Resolves after `ms`, or at once when `stopped` resolves first. */
function pause(ms: number, stopped: Promise<unknown>): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([new Promise<void>((resolve) => (timer = setTimeout(resolve, ms))), stopped]).then(() =>
    clearTimeout(timer),
  );
}

export const top: Command = {
  name: 'top',
  summary: "show a running dashboard's top keys and rates in the terminal",
  help: HELP,
  options: {
    url: { type: 'string' },
    top: { type: 'string' },
    interval: { type: 'string' },
    json: { type: 'boolean' },
  },
  async run(parsed, io: CliIo) {
    if (parsed.positionals.length > 0)
      throw new UsageError(
        `sluice top: unexpected argument ${JSON.stringify(parsed.positionals[0])}; see sluice top --help`,
      );
    const count = wholeNumber(parsed, 'top', 10, 100);
    const intervalMs = wholeNumber(parsed, 'interval', 1, 3600) * 1000;
    const url = dataUrl(parsed, count);
    const token = io.env.SLUICE_DASHBOARD_TOKEN || undefined;
    if (parsed.values.json) {
      io.out(JSON.stringify(await fetchSnapshot(url, token)));
      return EXIT.ok;
    }
    let stop = () => undefined as void;
    const stopped = new Promise<void>((resolve) => (stop = resolve));
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    let running = true;
    void stopped.then(() => (running = false));
    const where = parsed.values.url as string;
    while (running) {
      const lines = await fetchSnapshot(url, token).then(
        (snapshot) => renderTop(snapshot, where, count),
        (error: unknown) => [`sluice top  ${where}`, '', (error as Error).message, '(retrying)'],
      );
      if (!running) break;
      io.out(CLEAR + lines.join('\n'));
      await pause(intervalMs, stopped);
    }
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    return EXIT.ok;
  },
};
