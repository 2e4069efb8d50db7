import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import type { RedisServer } from '../../../src/cli/redis-server.js';
import { renderTop } from '../../../src/cli/commands/top.js';
import {
  createDashboard,
  createLimiter,
  fixedWindow,
  memoryStore,
  type DashboardSnapshot,
} from '../../../src/index.js';
import { startTestServer } from '../../support/servers.js';
import { PATIENT, useServices, type Service } from '../../support/service.js';

// The built command, in a real terminal: tmux on a socket of this test's own.
const CLI = 'dist/esm/cli/main.js';
const SOCKET = `sluice-top-${process.pid}`;
const tmux = (...args: string[]) => execFileSync('tmux', ['-L', SOCKET, ...args], { encoding: 'utf8' });
const screen = () => tmux('capture-pane', '-p', '-t', 'top');

/** Waits until the terminal shows a line matching `pattern`; fails with the screen after 60 s. */
async function waitForScreen(pattern: RegExp): Promise<string> {
  for (let tries = 0; tries < 600; tries++) {
    const shown = screen();
    if (pattern.test(shown)) return shown;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.fail(`the terminal never showed ${pattern}:\n${screen()}`);
}

/** Runs the built `sluice top` to its end: its exit code and stderr. */
const run = (args: string[]) =>
  promisify(execFile)(process.execPath, [CLI, 'top', ...args]).then(
    () => ({ code: 0, stderr: '' }),
    (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr.trim() }),
  );

const CONFIG = `domain: api
descriptors:
  - key: user
    rate_limit: { unit: day, requests_per_unit: 3 }
`;

describe('sluice top', () => {
  const services = useServices();
  let redis: RedisServer;
  let dir = '';
  let service: Service;
  let url = '';

  before(async () => {
    redis = await startTestServer();
    dir = await mkdtemp(join(tmpdir(), 'sluice-top-'));
    await writeFile(join(dir, 'ratelimit.yaml'), CONFIG);
  });
  after(async () => {
    try {
      tmux('kill-server');
    } catch {
      // No session was started, or it has ended.
    }
    await redis?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const call = (user: string, times: number) =>
    (async () => {
      for (let i = 0; i < times; i++)
        await service.json({ domain: 'api', descriptors: [{ entries: [{ key: 'user', value: user }] }] });
    })();

  it('shows the service dashboard top keys and rates in a terminal, refreshing, until Ctrl-C', async () => {
    const prefix = `top${process.pid}`;
    service = await services.start([
      '--config',
      join(dir, 'ratelimit.yaml'),
      '--redis',
      redis.url,
      '--prefix',
      prefix,
      '--dashboard',
      ...PATIENT,
    ]);
    assert.ok(service.stderr.some((line) => line.includes('/dashboard, for loopback clients only')));
    url = `http://127.0.0.1:${service.httpPort}/dashboard`;
    await call('alice', 5);
    await call('bob', 1);
    // Its exit code, written by the shell that runs it: tmux 3.3 does not always learn a pane's.
    const exitFile = join(dir, 'top-exit');
    tmux(
      'new-session',
      '-d',
      '-s',
      'top',
      '-x',
      '150',
      '-y',
      '40',
      `node ${CLI} top --url ${url}; echo $? > ${exitFile}`,
    );
    tmux('set-option', '-t', 'top', 'remain-on-exit', 'on');
    let shown = await waitForScreen(/^api\.user\s+\d+\s+\d+\s+\d+\s+4\s+2\s+0\s*$/m);
    assert.match(shown, /^TOP KEYS BY DENIALS\n.*\n\["api","user","alice"\]\s+api\.user\s+2\s+0\s*$/m);
    assert.match(
      shown,
      /^TOP KEYS BY USE\n.*\n\["api","user","alice"\]\s+api\.user\s+5\s+0\n\["api","user","bob"\]\s+api\.user\s+1\s+0/m,
    );

    // It follows the load.
    await call('bob', 4);
    shown = await waitForScreen(/^api\.user\s+\d+\s+\d+\s+\d+\s+6\s+4\s+0\s*$/m);
    assert.match(shown, /^\["api","user","bob"\]\s+api\.user\s+5\s+0\s*$/m);

    tmux('send-keys', '-t', 'top', 'C-c');
    let exitCode = '';
    for (let tries = 0; tries < 600 && exitCode === ''; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      exitCode = await readFile(exitFile, 'utf8').catch(() => '');
    }
    assert.equal(exitCode.trim(), '0');

    // --json: one snapshot.
    const { stdout } = await promisify(execFile)(process.execPath, [CLI, 'top', '--url', url, '--json', '--top', '1']);
    const snapshot = JSON.parse(stdout) as DashboardSnapshot;
    assert.deepEqual(
      snapshot.series.map((s) => [s.name, s.total, s.topUsed.map((hit) => hit.item)]),
      [['api.user', { admitted: 6, denied: 4, shadowDenied: 0 }, ['["api","user","alice"]']]],
    );
    assert.match(snapshot.rules, /^api\.user: fixed-window 3 per 1d/m);
    // The lookup takes a key as the dashboard shows it, and peeks the rule it reaches.
    const lookup = (await (await fetch(`${url}/key?key=${encodeURIComponent('["api","user","bob"]')}`)).json()) as {
      states: { name: string; decision: { allowed: boolean; remaining: number } }[];
    };
    assert.deepEqual(
      lookup.states.map((s) => [s.name, s.decision.allowed, s.decision.remaining]),
      [['api.user', false, 0]],
    );
    const missing = await run(['--url', url.replace('/dashboard', '/nothing'), '--json']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /answered 404/);
  });

  it('names a bad flag', async () => {
    assert.deepEqual(await run(['--url', 'ftp://x']), {
      code: 2,
      stderr: 'sluice top: --url must be an http:// or https:// URL; got "ftp://x"',
    });
    assert.deepEqual(await run(['--url', 'http://127.0.0.1:1/dashboard', '--top', '0']), {
      code: 2,
      stderr: 'sluice top: --top must be a whole number from 1 to 100; got "0"',
    });
  });
});

describe('renderTop', () => {
  it('says when a busy rule was sampled, and only then', async () => {
    const dashboard = createDashboard();
    const limiter = dashboard.observe(
      createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 10, window: '1h' }), prefix: 'p' }),
    );
    const note = (lines: string[]) => lines.filter((line) => line.startsWith('Past 1000 decisions a second'));
    await Promise.all(Array.from({ length: 10 }, (_, i) => limiter.limit(`k${i % 3}`)));
    assert.deepEqual(note(renderTop(dashboard.snapshot(), 'here', 10)), []);
    // Well past 1,000 in a second, whichever second they fall in.
    await Promise.all(Array.from({ length: 5000 }, (_, i) => limiter.limit(`k${i % 3}`)));
    assert.deepEqual(note(renderTop(dashboard.snapshot(), 'here', 10)), [
      'Past 1000 decisions a second per rule, 1 in 32 is counted, weighted 32: a count may also be off by about sqrt(31 x count).',
    ]);
  });
});
