import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { runBenchmarks } from '../../bench/run.js';

// Checks that the bench runs end to end and writes its report; never how fast anything is.
it('npm run bench works end to end in quick mode and writes its report and chart', async () => {
  const outputDir = await mkdtemp(join(tmpdir(), 'sluice-bench-'));
  try {
    const progress: string[] = [];
    const report = await runBenchmarks({ quick: true, outputDir, onProgress: (line) => progress.push(line) });
    const names = report.redis.map((r) => r.name);
    for (const name of ['sluice fixedWindow', 'rate-limiter-flexible RateLimiterRedis', '@upstash/ratelimit tokenBucket', 'ioredis INCR']) {
      assert.ok(names.includes(name), `${name} in ${names.join(', ')}`);
    }
    for (const result of report.redis) {
      assert.equal(result.samples.length, report.scenarios.length);
      for (const samples of result.samples) assert.ok(samples.length === 1 && (samples[0]?.decisionsPerSecond ?? 0) > 0, result.name);
    }
    assert.equal(report.flood.identical, true);
    assert.ok(report.many.decisionsPerSecond.length === 1 && (report.many.decisionsPerSecond[0] ?? 0) > 0);
    assert.ok(report.flood.callsWith < report.flood.callsWithout);
    assert.ok(progress.length > report.redis.length * report.scenarios.length);
    const markdown = await readFile(join(outputDir, 'benchmarks.md'), 'utf8');
    for (const result of [report.serve.inProcess, report.serve.grpc, report.serve.json]) assert.ok(result.decisionsPerSecond > 0);
    for (const heading of ['## Targets', '## Decisions per second (Redis)', '## Redis memory per tracked client', '## limitMany', '## sluice serve', '## Reproduce']) assert.ok(markdown.includes(heading), heading);
    assert.ok(markdown.includes('npm ci && npm run bench'));
    const chart = await readFile(join(outputDir, 'benchmarks.svg'), 'utf8');
    assert.match(chart, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    assert.equal((chart.match(/<rect /g) ?? []).length, report.redis.length + 1);
  } finally {
    await rm(outputDir, { recursive: true, force: true });
  }
});
