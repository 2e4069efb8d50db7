import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { resolve } from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { uniquePrefix, useRedis } from '../support/redis.js';
import { sluice } from '../support/cli.js';

const harness = useRedis();

describe('sluice usage and failures', () => {
  it('prints help for the tool and for every command, with examples', async () => {
    const top = await sluice(['--help']);
    assert.equal(top.code, 0);
    assert.match(top.out.join('\n'), /Exit codes: 0 done, 1 failed/);
    for (const command of ['demo', 'inspect', 'reset', 'bench']) {
      for (const flag of ['--help', '-h']) {
        const run = await sluice([command, flag]);
        assert.equal(run.code, 0);
        assert.match(
          run.out.join('\n'),
          new RegExp(`^Usage: sluice ${command}[\\s\\S]*Examples:\\n  sluice ${command}\\b`),
        );
      }
    }
  });

  it('demo --help names every row the demo prints', async () => {
    const help = (await sluice(['demo', '--help'])).out.join(' ').replace(/\s+/g, ' ');
    for (const row of [
      'blocked forever',
      'ten lines',
      'Retry-After',
      'fixed window',
      'sliding log',
      'GCRA',
      'sliding window',
      'token bucket',
      'concurrency',
    ])
      assert.ok(help.includes(row), row);
  });

  it('fails with one line naming the bad argument and exit code 2', async () => {
    const url = ['--redis', harness.server.url];
    const cases: [string[], RegExp][] = [
      [['launch'], /^sluice: unknown command "launch"/],
      [
        ['inspect', 'k', '--polcy', 'x', ...url],
        /^sluice inspect: Unknown option '--polcy'; see sluice inspect --help$/,
      ],
      [['inspect', 'k', '--policy'], /Option '--policy <value>' argument missing/],
      [['inspect', '--policy', 'fixed-window:5/1s', ...url], /^sluice inspect: missing <key>/],
      [['inspect', 'k', 'k2', '--policy', 'fixed-window:5/1s', ...url], /^sluice inspect: unexpected argument "k2"/],
      [['inspect', 'k', ...url], /^sluice inspect: missing --policy/],
      [['inspect', 'k', '--policy', 'fixed:5/1s', ...url], /--policy must be .*; got "fixed:5\/1s"$/],
      [['reset', 'k', '--prefix', 'a{b}', ...url], /^sluice: --prefix "a\{b\}": option "prefix" must be/],
      [
        ['reset', 'k', '--redis', 'localhost:6379'],
        /^sluice: --redis must start with redis:\/\/ or rediss:\/\/; got "localhost:6379"$/,
      ],
      [['demo', '--json'], /^sluice demo: Unknown option '--json'/],
      [
        ['demo', '--redis', 'localhost'],
        /^sluice: --redis must be a URL such as redis:\/\/127.0.0.1:6379; got "localhost"$/,
      ],
    ];
    for (const [argv, message] of cases) {
      const run = await sluice(argv);
      assert.equal(run.code, 2, argv.join(' '));
      assert.deepEqual(run.out, [], argv.join(' '));
      assert.equal(run.err.length, 1, argv.join(' '));
      assert.match(run.err[0] ?? '', message);
    }
    const bad = await sluice(['reset', 'k'], { REDIS_URL: 'not a url' });
    assert.deepEqual(bad, {
      code: 2,
      out: [],
      err: ['sluice: REDIS_URL must be a URL such as redis://127.0.0.1:6379; got "not a url"'],
    });
  });

  it('says a Redis is needed (exit 3) and fails (exit 1) on one it cannot reach, never printing a password', async () => {
    for (const command of ['inspect', 'reset']) {
      const run = await sluice([command, 'k', '--policy', 'fixed-window:5/1s']);
      assert.deepEqual(run, {
        code: 3,
        out: [],
        err: [`sluice ${command}: needs a Redis; pass --redis redis://host:6379 or set REDIS_URL`],
      });
    }
    // Port 1 on loopback: nothing listens there.
    for (const argv of [['reset', 'k'], ['demo']]) {
      const down = await sluice([...argv, '--redis', 'redis://admin:hunter2@127.0.0.1:1']);
      assert.deepEqual(down, {
        code: 1,
        out: [],
        err: ['sluice: cannot connect to Redis at redis://admin:***@127.0.0.1:1: connect ECONNREFUSED 127.0.0.1:1'],
      });
    }
  });

  it("prints the package's version as the built bin, with --version and -V, from any directory", async () => {
    const { version } = JSON.parse(await readFile('package.json', 'utf8')) as { version: string };
    assert.match(version, /^\d+\.\d+\.\d+/);
    for (const flag of ['--version', '-V']) {
      const { stdout, stderr } = await promisify(execFile)(process.execPath, [resolve('dist/esm/cli/main.js'), flag], {
        cwd: tmpdir(),
      });
      assert.deepEqual({ stdout, stderr }, { stdout: `${version}\n`, stderr: '' }, flag);
    }
  });

  it('works as the built bin, with REDIS_URL and --json, and exits with its code', async () => {
    const run = promisify(execFile);
    const bin = [
      'dist/esm/cli/main.js',
      'inspect',
      'k',
      '--policy',
      'sliding-log:5/1m',
      '--prefix',
      uniquePrefix(),
      '--json',
    ];
    const { stdout } = await run(process.execPath, bin, { env: { ...process.env, REDIS_URL: harness.server.url } });
    assert.equal((JSON.parse(stdout) as { decision: { remaining: number } }).decision.remaining, 5);
    await assert.rejects(
      run(process.execPath, [...bin.slice(0, 4), 'sliding-log:0/1m'], {
        env: { ...process.env, REDIS_URL: harness.server.url },
      }),
      (error: { code?: number; stderr?: string }) => {
        assert.equal(error.code, 2);
        assert.match(error.stderr ?? '', /^sluice: --policy "sliding-log:0\/1m": option "limit" must be/);
        return true;
      },
    );
  });
});
