import { FRAMEWORKS, HTTP_POLICY, limiterName } from './http-contenders.js';
import { ceilingRatio, findServer, pairRatio, type HttpReport } from './http.js';
import { median, spreadPercent, type Sample } from './measure.js';
import type { BenchReport, Scenario } from './run.js';
import { SERVE_IN_FLIGHT, type ServeSample } from './serve.js';

const COLOURS: Record<string, string> = {
  sluice: '#2b6cb0',
  'rate-limiter-flexible': '#c05621',
  '@upstash/ratelimit': '#6b46c1',
  ioredis: '#718096',
};

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function whole(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}

function scenarioIndex(report: BenchReport, scenario: Scenario): number {
  return report.scenarios.findIndex((s) => s.inFlight === scenario.inFlight && s.keys === scenario.keys);
}

function perSecond(report: BenchReport, name: string, scenario: Scenario): readonly number[] {
  const samples = report.redis.find((r) => r.name === name)?.samples[scenarioIndex(report, scenario)] ?? [];
  return samples.map((s) => s.decisionsPerSecond);
}

const MAIN: Scenario = { inFlight: 256, keys: 10_000 };

/** A horizontal bar per contender: median decisions/s at 256 in flight over 10,000 keys. */
export function renderChart(report: BenchReport): string {
  const rows = report.redis.map((r) => ({
    name: r.name,
    library: r.library,
    value: median(perSecond(report, r.name, MAIN)),
  }));
  const max = Math.max(1, ...rows.map((r) => r.value));
  const labelWidth = 300;
  const barWidth = 360;
  const rowHeight = 26;
  const top = 40;
  const height = top + rows.length * rowHeight + 20;
  const bars = rows.map((row, i) => {
    const y = top + i * rowHeight;
    const width = Math.max(1, (row.value / max) * barWidth);
    return [
      `<text x="${labelWidth - 8}" y="${y + 17}" text-anchor="end">${escapeXml(row.name)}</text>`,
      `<rect x="${labelWidth}" y="${y + 4}" width="${width.toFixed(1)}" height="${rowHeight - 8}" fill="${COLOURS[row.library] ?? '#333'}"/>`,
      `<text x="${(labelWidth + width + 6).toFixed(1)}" y="${y + 17}">${whole(row.value)}/s</text>`,
    ].join('');
  });
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${labelWidth + barWidth + 110}" height="${height}" font-family="sans-serif" font-size="13">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="10" y="22" font-weight="bold">Decisions per second, 256 in flight, 10,000 keys, one local Redis (median of ${report.runs} runs)</text>`,
    ...bars,
    '</svg>',
    '',
  ].join('\n');
}

function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  return [
    `| ${header.join(' | ')} |`,
    `|${header.map((_, i) => (i === 0 ? ' --- ' : ' ---: ')).join('|')}|`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');
}

function describeScenario(s: Scenario): string {
  return `${s.inFlight} in flight, ${s.keys === 1 ? 'one hot key' : `${whole(s.keys)} keys`}`;
}

/** The HTTP section: per framework, each server's ratio to the no-limiter server, its requests/s and latency. */
export function renderHttp(http: HttpReport, cpus: string): string {
  const tables = FRAMEWORKS.map((framework) => {
    const rows = http.servers
      .filter((server) => server.config.framework === framework)
      .map((server) => {
        const ratios = server.samples.map((s) => s.ceilingRatio);
        const at = (pick: (s: (typeof server.samples)[number]) => number) => median(server.samples.map(pick));
        return [
          limiterName(server.config),
          server.config.store ?? '',
          `${ceilingRatio(server).toFixed(2)}x (±${(spreadPercent(ratios) / 2).toFixed(0)}%)`,
          whole(at((s) => s.requestsPerSecond)),
          `${at((s) => s.p50Ms)} ms`,
          `${at((s) => s.p99Ms)} ms`,
          server.config.store === 'redis' ? whole(at((s) => s.keysInRedis ?? 0)) : '',
          server.rateLimitHeaders.join(', '),
        ];
      });
    const on = findServer(http, framework, 'sluice', 'redis', true);
    const off = findServer(http, framework, 'sluice', 'redis');
    const pipelining =
      on && off
        ? `\n\nsluice redisStore with \`enableAutoPipelining: true\`: ${pairRatio(on, off).toFixed(2)}x the requests/s of sluice redisStore without it (same rounds).`
        : '';
    return `### ${framework}\n\n${table(['limiter', 'store', 'vs no limiter', 'requests/s', 'p50', 'p99', 'keys in Redis', 'rate-limit fields'], rows)}${pipelining}`;
  });
  return `## HTTP

autocannon, in the bench's process, against one server at a time: ${http.connections} connections, ${http.load}, ${http.rounds} round(s).
Every request comes from the next of ${whole(http.clients)} client addresses, sent as \`X-Forwarded-For\`, and every server
trusts exactly one proxy hop, so each keys on that address: sluice \`trustedProxies: 1\`; Express \`trust proxy: 1\`
(express-rate-limit and the rate-limiter-flexible middleware key on \`req.ip\`); Fastify \`trustProxy\` as a function
trusting one hop (Fastify 5 given a number trusts none; @fastify/rate-limit and the rate-limiter-flexible hook key on
\`request.ip\`); on node:http the rate-limiter-flexible middleware keys on the last \`X-Forwarded-For\` element.
"keys in Redis" (after each measurement) shows every limiter keyed per client.

- Each server runs in a process of its own (\`bench/http-server.ts\`), started once; Redis is a redis-server of the
  bench's own, emptied (\`FLUSHALL\`) before each server's turn, which is a warm-up and then the measurement. Each round
  measures every server of a framework back to back, starting with another one each round.
- **vs no limiter**: the server's requests/s over its framework's server without a limiter, in the same round, then
  the median over rounds (±N%: half their spread). This is the figure to compare, not requests/s.
- Every limiter gets the same policy: a fixed window of ${HTTP_POLICY.windowSeconds / 60} minutes allowing ${whole(HTTP_POLICY.limit)} requests,
  so nobody is denied (the bench fails on any response but a 2xx) and every request does the same work. Each sends its
  default rate-limit fields (the last column, read from one response before the rounds); the rate-limiter-flexible
  middleware, written in the bench, sends the \`X-RateLimit-*\` fields the others' defaults send.
  @fastify/rate-limit's memory store is given room for 20,000 clients (its default, 5,000, would evict).
- Every ioredis client has ioredis's defaults (no autopipelining); sluice is also measured with \`enableAutoPipelining\`.
- The client, the server and Redis share this machine's CPUs (${cpus}): autocannon's own CPU is part of the
  budget, so the ratios say how much of the whole a limiter costs, on this machine; p50 and p99 are autocannon's,
  in whole milliseconds.

${tables.join('\n\n')}
`;
}

/** docs/benchmarks.md: every figure of the run, the targets judged on them, and how to reproduce. */
/** One `sluice serve` process against the library in the bench's process, on the same Redis. */
function serveSection(report: BenchReport): string {
  const { serve } = report;
  const micros = (value: number) => (Number.isNaN(value) ? 'n/a' : value.toFixed(0));
  const row = (name: string, sample: ServeSample, service: boolean): string[] => [
    name,
    whole(sample.decisionsPerSecond),
    `${sample.p50Ms.toFixed(2)} ms`,
    `${sample.p99Ms.toFixed(2)} ms`,
    `${(sample.decisionsPerSecond / serve.inProcess.decisionsPerSecond).toFixed(2)}x`,
    micros(sample.cpuMicros.callers),
    service ? micros(sample.cpuMicros.service) : '',
    micros(sample.cpuMicros.redis),
  ];
  const rows = table(
    ['path', 'decisions/s', 'p50', 'p99', 'of in-process', 'CPU µs: callers', 'service', 'Redis'],
    [
      row('library, in process', serve.inProcess, false),
      row('sluice serve, gRPC', serve.grpc, true),
      row('sluice serve, POST /json', serve.json, true),
    ],
  );
  return `One \`sluice serve\` process (the built command) on the bench's Redis, ${SERVE_IN_FLIGHT} calls in flight over 1,000 keys, each a
counted decision, beside \`limit()\` in the bench's own process on the same Redis (median of the runs; \`npm run bench:serve\` runs this part alone).
The service is asked by ${serve.loadProcesses} load processes of the bench's (\`bench/serve-load.ts\`), which share the calls in flight, each
with its own gRPC connection and keep-alive HTTP connections. Their clients are written over node:net and send requests
prepared once, as h2load or wrk do: @grpc/grpc-js's client spends several times the service's CPU per call, and
node:http2's and node:http's about as much as the service.

- **CPU µs**: CPU time per decision, in microseconds, of the processes asking (the bench's own for the library, which
  decides in it; the load processes for the service), of the service, and of Redis.
- The bench, the load processes, the service and Redis share this machine's CPUs (${report.environment.cpus}), with whatever else
  runs on it. One Node process uses about one core at most, so the service's decisions/s are at most 1,000,000 over its
  own CPU µs, and at most the CPUs times 1,000,000 over the sum of the three columns: what the load processes spend is
  CPU the service cannot have. The library is bounded alike by its callers column (its own process) and by the sum of
  its two. On a larger machine, with the callers elsewhere (as Envoy is), only the service's own column bounds it.
- \`npm run bench:serve\` also measures, in the same rounds, what a call costs beside a Go service: \`sluice serve\` on its
  memory store over gRPC against servers that answer a constant and decide nothing (grpc-go, skipped where there is no
  \`go\`; bare node:http2; \`bench/serve-floor.ts\`), and Redis's CPU per decision against envoyproxy/ratelimit's commands
  replayed at the service's rate (\`bench/redis-pattern.ts\`); \`-- --floor\` adds bare @grpc/grpc-js and bare node:http
  ([performance.md](performance.md#sluice-serve-what-a-call-costs)).

${rows}`;
}

export function renderMarkdown(report: BenchReport): string {
  const flexible = 'rate-limiter-flexible RateLimiterRedis';
  const throughput = table(
    ['contender', ...report.scenarios.map(describeScenario)],
    report.redis.map((r) => [
      r.name,
      ...report.scenarios.map((s) => {
        const values = perSecond(report, r.name, s);
        return `${whole(median(values))} (±${(spreadPercent(values) / 2).toFixed(0)}%)`;
      }),
    ]),
  );
  const ratios = table(
    [
      'contender',
      'vs RateLimiterRedis, 1 in flight',
      'vs RateLimiterRedis, 256 in flight',
      'vs ioredis INCR, 256 in flight',
    ],
    report.redis.map((r) => [
      r.name,
      `${report.ratio(r.name, flexible, { inFlight: 1, keys: 10_000 }).toFixed(2)}x`,
      `${report.ratio(r.name, flexible, MAIN).toFixed(2)}x`,
      `${report.ratio(r.name, 'ioredis INCR', MAIN).toFixed(2)}x`,
    ]),
  );
  const latency = table(
    [
      'contender',
      'p50, 1 in flight',
      'p99, 1 in flight',
      'Redis CPU per decision, 1 in flight',
      'p50, 256 in flight',
      'p99, 256 in flight',
      'Redis CPU per decision, 256 in flight',
    ],
    report.redis.map((r) => {
      const at = (inFlight: number) => r.samples[scenarioIndex(report, { inFlight, keys: 10_000 })] ?? [];
      const ms = (values: readonly number[]) => `${median(values).toFixed(3)} ms`;
      const us = (samples: readonly Sample[]) =>
        `${median(samples.map((s) => s.redisCpuUs ?? Number.NaN)).toFixed(1)} µs`;
      return [
        r.name,
        ms(at(1).map((s) => s.p50Ms)),
        ms(at(1).map((s) => s.p99Ms)),
        us(at(1)),
        ms(at(256).map((s) => s.p50Ms)),
        ms(at(256).map((s) => s.p99Ms)),
        us(at(256)),
      ];
    }),
  );
  const memory = table(
    ['contender', 'used_memory per client', 'MEMORY USAGE per key'],
    report.bytesPerClient.map((b) => [b.name, `${b.bytes.toFixed(2)} B`, `${b.memoryUsage.toFixed(1)} B`]),
  );
  const flexibleMemory = median(
    report.inProcess.find((m) => m.name === 'rate-limiter-flexible RateLimiterMemory')?.decisionsPerSecond ?? [],
  );
  const inProcess = table(
    ['contender', 'decisions/s', 'vs RateLimiterMemory'],
    report.inProcess.map((m) => [
      m.name,
      `${whole(median(m.decisionsPerSecond))} (±${(spreadPercent(m.decisionsPerSecond) / 2).toFixed(0)}%)`,
      `${(median(m.decisionsPerSecond) / flexibleMemory).toFixed(2)}x`,
    ]),
  );
  const f = report.flood;
  const r = report.many;
  const targets = table(
    ['target', 'measured', 'result'],
    report.targets.map((t) => [t.description, t.measured, t.met ? 'met' : '**missed**']),
  );
  const e = report.environment;
  return `# Benchmarks

Measured by \`${report.command}\` on ${report.date}${report.quick ? ' (**quick mode: tiny counts, not meaningful figures**)' : ''}.
Everything below comes from one run: every contender against the same private Redis, started by the bench
(the HTTP servers against another, see [HTTP](#http)).

- Node ${e.node}, Redis ${e.redis}, ${e.cpus}.
- Load average before and after: ${e.loadBefore} / ${e.loadAfter}. The machine was shared with other work while measuring:
  absolute figures move with that load, so compare the **ratios**, which are taken between contenders measured
  back to back in the same round, then the median over ${report.runs} rounds. ±N% is half the spread (max - min) of the rounds.
- Each contender runs in a process of its own (\`bench/contender-process.ts\`), so that no other contender's code shares
  the JIT's feedback with it, as in an application that uses one limiter. Before each measurement the Redis database is
  emptied (\`FLUSHDB\`) and the contender warms up on the same load for ${report.runMs / 4} ms.
- Each measurement is a closed loop of N calls in flight for ${report.runMs} ms. Every Redis contender uses an ioredis
  client of its own with \`enableAutoPipelining: true\`. Limits are high enough that every call is admitted (same work
  for all), except sluice's slidingLog on the hot key, which fills its 10,000-entry log and then denies.
- Peers: rate-limiter-flexible \`RateLimiterRedis\` (fixed window) and \`RateLimiterMemory\`; @upstash/ratelimit on the
  local Redis through a small shim in \`bench/upstash-shim.ts\` (EVALSHA through ioredis; the \`#!lua flags=allow-key-locking\`
  line, which Redis 7.0 rejects, removed), with \`timeout: 0\` so that it sets no timer per call.

![Decisions per second](benchmarks.svg)

## Targets

${targets}

## Decisions per second (Redis)

${throughput}

## Ratios (within each round, median over rounds; 10,000 keys)

${ratios}

## Latency (10,000 keys)

${latency}

## Redis memory per tracked client

\`used_memory\` after two decisions (100 ms apart) for each of ${whole(report.bytesPerClient[0]?.clients ?? 0)} keys minus before, on a
redis-server of its own per contender (an empty database of the \`--redis\` server given instead), for a typical quota
(100 per hour). The plain counter is \`SET key 1 PX ...\` under a key
as long as sluice's. \`MEMORY USAGE\` is the mean over up to 200 of the contender's keys: the keys alone, while
\`used_memory\` also counts whatever else grew in Redis during those calls. That includes fixed amounts
that are not per client: \`npx tsx bench/memory-scaling.ts 5000 30000\` measures the plain counter,
fixedWindow and gcra at both counts. On 2026-11-30 their totals differed by 0 B, 128 B or about 4 KB
(one allocator page), on either side and at both counts, never in proportion to the clients. So a
difference of 0.4 B per client here is one such page spread over 10,000 clients, not a byte per key.

${memory}

## In process (10,000 keys, one call at a time)

${inProcess}

## limitMany

sluice fixedWindow, \`limitMany\` of ${r.size} keys, one call in flight at a time: ${whole(median(r.decisionsPerSecond))} decisions/s
(±${(spreadPercent(r.decisionsPerSecond) / 2).toFixed(0)}%), p50 ${r.p50ManyMs.toFixed(3)} ms per call of ${r.size} keys, against
p50 ${r.p50OneMs.toFixed(3)} ms for one \`limit()\` of one key: the ${r.size} decisions share one round trip and one EVALSHA.

## sluice serve

${serveSection(report)}

${renderHttp(report.http, e.cpus)}
## A flood from one denied key

${whole(f.calls)} calls, ${f.inFlight} in flight, on one key allowed 10 per hour, from a fresh key: ${whole(f.callsWithout)} decisions
reached Redis without \`deniedCache\` (in ${whole(f.commandsWithout)} EVALSHA commands, batched) and ${whole(f.callsWith)} with it
(in ${whole(f.commandsWith)}): ${(f.callsWithout / f.callsWith).toFixed(1)}x fewer. The decisions were ${f.identical ? 'identical' : '**different**'} call by call
(allowed, limit, remaining). With the cache, only the calls sent before the first denial came back reach Redis,
so the count with the cache grows with the calls in flight, not with the flood.

## Package size

What \`npm install\` unpacks, measured on 2026-12-01 by \`npm pack --dry-run --json <package>\` (sluice: in a
fresh clone, which \`prepare\` builds); \`unpackedSize\` and \`entryCount\` of its output. Not measured by \`npm run bench\`.

| package | unpacked | files |
| --- | ---: | ---: |
| sluice 0.1.0, before (with source maps, whose sources were not shipped) | 1,158,871 B | 427 |
| sluice 0.1.0 | 692,087 B | 197 |
| sluice 0.1.0, its docs/ alone (the pages its errors link to) | 149,316 B | 16 |
| rate-limiter-flexible 11.4.0 | 461,253 B | 87 |
| @upstash/ratelimit 2.2.0 (not counting its dependency @upstash/core-analytics) | 444,979 B | 9 |
| express-rate-limit 8.7.5 | 157,607 B | 9 |
| rate-limit-redis 6.0.1 | 43,747 B | 10 |

## Reproduce

\`\`\`
${report.command}
\`\`\`

\`npm run bench -- --quick\` checks that everything runs (tiny counts); \`npm run bench -- --redis redis://host:port\`
measures against another standalone Redis: it writes keys under \`bench*\` prefixes, into databases 1-8 for the memory
figures, and runs \`SCRIPT FLUSH\` before each memory reading, so never point it at a Redis in use (the HTTP part
always starts a redis-server of its own). \`npx tsx bench/http.ts [--quick] [--rounds N] [--seconds S]\` runs the HTTP
part alone and prints it (\`npm run build\` first: the servers import \`dist/esm\`).
`;
}
