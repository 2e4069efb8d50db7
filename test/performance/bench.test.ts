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
    for (const name of [
      'sluice fixedWindow',
      'rate-limiter-flexible RateLimiterRedis',
      '@upstash/ratelimit tokenBucket',
      'ioredis INCR',
    ]) {
      assert.ok(names.includes(name), `${name} in ${names.join(', ')}`);
    }
    for (const result of report.redis) {
      assert.equal(result.samples.length, report.scenarios.length);
      for (const samples of result.samples)
        assert.ok(samples.length === 1 && (samples[0]?.decisionsPerSecond ?? 0) > 0, result.name);
    }
    assert.equal(report.flood.identical, true, report.flood.firstDifference);
    assert.ok(report.many.decisionsPerSecond.length === 1 && (report.many.decisionsPerSecond[0] ?? 0) > 0);
    assert.ok(report.flood.callsWith < report.flood.callsWithout);
    assert.ok(progress.length > report.redis.length * report.scenarios.length);
    // HTTP: every framework's ceiling, sluice and each peer on both stores, and sluice auto-pipelined, each measured once.
    const servers = report.http.servers.map((server) => server.name);
    for (const name of [
      'express: no limiter',
      'express: sluice redisStore',
      'express: express-rate-limit + rate-limit-redis',
      'express: express-rate-limit MemoryStore',
      'fastify: @fastify/rate-limit + Redis',
      'fastify: @fastify/rate-limit LocalStore',
      'fastify: sluice memoryStore',
      'node:http: rate-limiter-flexible RateLimiterRedis',
      'node:http: sluice redisStore, autopipelining',
    ]) {
      assert.ok(servers.includes(name), `${name} in ${servers.join(', ')}`);
    }
    assert.equal(servers.length, 22);
    for (const server of report.http.servers) {
      assert.equal(server.samples.length, 1, server.name);
      assert.ok((server.samples[0]?.ceilingRatio ?? 0) > 0, server.name);
      assert.ok((server.samples[0]?.cpuMicrosPerRequest ?? 0) > 0, server.name);
      // Every limiter answers with its rate-limit fields (sluice's default: draft-11); a ceiling with none.
      const fields =
        server.config.limiter === undefined
          ? []
          : server.config.limiter === 'sluice'
            ? ['ratelimit', 'ratelimit-policy']
            : ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'];
      assert.deepEqual(server.rateLimitHeaders, fields, server.name);
      // Quick mode measures 200 requests from 200 addresses, and each of these limiters keeps one key
      // per client: 200 keys shows each one keyed on X-Forwarded-For (the socket address would be 1 key).
      if (server.config.store === 'redis') assert.equal(server.samples[0]?.keysInRedis, 200, server.name);
    }
    assert.equal(report.targets.filter((target) => target.description.startsWith('HTTP, ')).length, 6);
    const markdown = await readFile(join(outputDir, 'benchmarks.md'), 'utf8');
    for (const result of [report.serve.inProcess, report.serve.grpc, report.serve.json])
      assert.ok(result.decisionsPerSecond > 0);
    for (const heading of [
      '## Targets',
      '## Decisions per second (Redis)',
      '## Redis memory per tracked client',
      '## limitMany',
      '## sluice serve',
      '## HTTP',
      '### express',
      '### fastify',
      '### node:http',
      '## Reproduce',
    ])
      assert.ok(markdown.includes(heading), heading);
    assert.ok(markdown.includes('npm ci && npm run bench'));
    assert.match(markdown, /\| express-rate-limit \+ rate-limit-redis \| redis \| \d+\.\d\dx \(±\d+%\) \|/);
    assert.match(
      markdown,
      /sluice redisStore with `enableAutoPipelining: true`: \d+\.\d\dx the requests\/s of sluice redisStore without it/,
    );
    const chart = await readFile(join(outputDir, 'benchmarks.svg'), 'utf8');
    assert.match(chart, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    assert.equal((chart.match(/<rect /g) ?? []).length, report.redis.length + 1);
  } finally {
    await rm(outputDir, { recursive: true, force: true });
  }
});
