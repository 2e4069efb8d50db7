import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { resolve } from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { UsageError } from '../../src/cli/command.js';
import { parsePolicySpec } from '../../src/cli/policy-spec.js';
import { runCli } from '../../src/cli/run.js';
import { createLimiter, fixedWindow, redisStore, slidingLog, tokenBucket, type Policy } from '../../src/index.js';
import { keysWithTtl, uniquePrefix, useRedis } from '../support/redis.js';

const harness = useRedis();

interface Run {
  code: number;
  out: string[];
  err: string[];
}

async function sluice(argv: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(argv, { out: (line) => out.push(line), err: (line) => err.push(line), env });
  return { code, out, err };
}

/** Runs a command that must succeed with --json and returns its parsed output. */
async function sluiceJson(argv: string[], env: NodeJS.ProcessEnv = {}): Promise<Record<string, unknown>> {
  const run = await sluice([...argv, '--json'], env);
  assert.deepEqual({ code: run.code, err: run.err, lines: run.out.length }, { code: 0, err: [], lines: 1 });
  return JSON.parse(run.out[0] ?? '') as Record<string, unknown>;
}

function limiterOn(prefix: string, policy: Policy) {
  return createLimiter({ store: redisStore(harness.redis), prefix, policy });
}

describe('policy syntax', () => {
  it('builds each algorithm from its compact form', () => {
    const pick = (p: Policy) => ({ algorithm: p.algorithm, limit: p.limit, windowMs: p.windowMs });
    assert.deepEqual(pick(parsePolicySpec('fixed-window:5/1s')), {
      algorithm: 'fixed-window',
      limit: 5,
      windowMs: 1000,
    });
    assert.deepEqual(pick(parsePolicySpec('fixed-window:100/m')), {
      algorithm: 'fixed-window',
      limit: 100,
      windowMs: 60_000,
    });
    assert.deepEqual(pick(parsePolicySpec('sliding-log:7/250ms')), {
      algorithm: 'sliding-log',
      limit: 7,
      windowMs: 250,
    });
    // 10 tokens at 2 per second: empty to full in 5 s.
    assert.deepEqual(pick(parsePolicySpec('token-bucket:10@2/s')), {
      algorithm: 'token-bucket',
      limit: 10,
      windowMs: 5000,
    });
    assert.deepEqual(pick(parsePolicySpec('token-bucket:3@0.5/s')), {
      algorithm: 'token-bucket',
      limit: 3,
      windowMs: 6000,
    });
    assert.deepEqual(pick(parsePolicySpec('token-bucket:60@1/1m')), {
      algorithm: 'token-bucket',
      limit: 60,
      windowMs: 3_600_000,
    });
  });

  it('rejects a bad policy with one line naming --policy and the value', () => {
    const cases: [string, RegExp][] = [
      ['fixed-window', /--policy must be fixed-window:<limit>\/<window>.*; got "fixed-window"$/],
      ['leaky-bucket:5/1s', /--policy must be .*; got "leaky-bucket:5\/1s"$/],
      ['fixed-window:0/1s', /^sluice: --policy "fixed-window:0\/1s": option "limit" must be a whole number/],
      [
        'sliding-log:20000/1s',
        /^sluice: --policy "sliding-log:20000\/1s": option "limit" must be a whole number from 1 to 10000; got 20000$/,
      ],
      ['fixed-window:5/1x', /^sluice: --policy "fixed-window:5\/1x": option "window" must be a duration/],
      ['fixed-window:5/5ms', /option "window" must be a duration of at least 10 ms/],
      ['token-bucket:10@0/s', /option "refillPerSecond" must be a finite number greater than 0; got 0$/],
    ];
    for (const [spec, message] of cases) {
      assert.throws(
        () => parsePolicySpec(spec),
        (error: unknown) => error instanceof UsageError && message.test(error.message) && !error.message.includes('\n'),
        spec,
      );
    }
  });
});

describe('sluice inspect', () => {
  it('shows remaining and reset without consuming, as JSON and as text', async () => {
    const prefix = uniquePrefix();
    await limiterOn(prefix, fixedWindow({ limit: 5, window: '1h' })).limit('user:42', { cost: 3 });
    const argv = [
      'inspect',
      'user:42',
      '--policy',
      'fixed-window:5/1h',
      '--prefix',
      prefix,
      '--redis',
      harness.server.url,
    ];
    const report = await sluiceJson(argv);
    const decision = report.decision as Record<string, number | boolean>;
    assert.deepEqual(
      { ...report, decision: { ...decision, resetAfterMs: undefined, policies: undefined, decidedAt: undefined } },
      {
        redis: `${harness.server.url}`,
        key: 'user:42',
        prefix,
        redisKey: `${prefix}:{user:42}:fw`,
        policy: { spec: 'fixed-window:5/1h', algorithm: 'fixed-window', limit: 5, windowMs: 3_600_000 },
        decision: {
          allowed: true,
          limit: 5,
          remaining: 2,
          retryAfterMs: 0,
          resetAfterMs: undefined,
          policies: undefined,
          decidedAt: undefined,
        },
      },
    );
    assert.ok((decision.resetAfterMs as number) > 0 && (decision.resetAfterMs as number) <= 3_600_000);
    // Redis's clock, which is this machine's.
    assert.ok(Math.abs((decision.decidedAt as number) - Date.now()) < 60_000, String(decision.decidedAt));
    // Inspecting again sees the same: nothing was consumed.
    assert.equal(((await sluiceJson(argv)).decision as Record<string, number>).remaining, 2);
    const text = await sluice(argv.slice(0, -2), { REDIS_URL: harness.server.url });
    assert.equal(text.code, 0);
    assert.deepEqual(text.out.slice(0, 4), [
      `key        user:42 (redis key ${prefix}:{user:42}:fw on ${harness.server.url})`,
      'policy     fixed-window, limit 5 per 3600 s',
      'next call  allowed',
      'remaining  2 of 5',
    ]);
  });

  it('reports a denial of a spent token bucket and sliding log, with the time to retry', async () => {
    const prefix = uniquePrefix();
    await limiterOn(prefix, tokenBucket({ capacity: 3, refillPerSecond: 1 / 3600 })).limit('k', { cost: 3 });
    await limiterOn(prefix, slidingLog({ limit: 2, window: '1h' })).limit('k', { cost: 2 });
    for (const spec of ['token-bucket:3@1/1h', 'sliding-log:2/1h']) {
      const decision = (
        await sluiceJson(['inspect', 'k', '--policy', spec, '--prefix', prefix], { REDIS_URL: harness.server.url })
      ).decision as Record<string, number | boolean>;
      assert.equal(decision.allowed, false, spec);
      assert.equal(decision.remaining, 0, spec);
      assert.ok((decision.retryAfterMs as number) > 3_500_000, `${spec}: retryAfterMs ${decision.retryAfterMs}`);
    }
  });
});

describe('sluice reset', () => {
  it('deletes the key under every algorithm, or under the one named', async () => {
    const prefix = uniquePrefix();
    const policies = [
      fixedWindow({ limit: 5, window: '1h' }),
      slidingLog({ limit: 5, window: '1h' }),
      tokenBucket({ capacity: 5, refillPerSecond: 1 }),
    ];
    const consumeAll = () => Promise.all(policies.map((policy) => limiterOn(prefix, policy).limit('user:7')));
    await consumeAll();
    assert.equal((await keysWithTtl(harness.redis, prefix)).size, 3);

    const only = await sluiceJson([
      'reset',
      'user:7',
      '--policy',
      'token-bucket',
      '--prefix',
      prefix,
      '--redis',
      harness.server.url,
    ]);
    assert.deepEqual(only.redisKeys, [`${prefix}:{user:7}:tb`]);
    assert.deepEqual([...(await keysWithTtl(harness.redis, prefix)).keys()].sort(), [
      `${prefix}:{user:7}:fw`,
      `${prefix}:{user:7}:sl`,
    ]);

    const all = await sluiceJson(['reset', 'user:7', '--prefix', prefix], { REDIS_URL: harness.server.url });
    assert.deepEqual(all.algorithms, ['fixed-window', 'sliding-log', 'sliding-window', 'gcra', 'token-bucket']);
    assert.equal((await keysWithTtl(harness.redis, prefix)).size, 0);

    await consumeAll();
    const text = await sluice([
      'reset',
      'user:7',
      '--policy',
      'sliding-log:5/1h',
      '--prefix',
      prefix,
      '--redis',
      harness.server.url,
    ]);
    assert.deepEqual(text, {
      code: 0,
      err: [],
      out: [`reset user:7 on ${harness.server.url}: deleted ${prefix}:{user:7}:sl`],
    });
    assert.equal((await keysWithTtl(harness.redis, prefix)).size, 2);
  });
});

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
