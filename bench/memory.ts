import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { startContender, type ContenderProcess } from './contender-process.js';
import { inProcessContenders } from './contenders.js';
import { median, type InProcessRate } from './measure.js';

/*
 * sluice's memory store against RateLimiterMemory, per algorithm: the in-process part of
 * `npm run bench` alone, each contender in a process of its own (bench/contender-process.ts),
 * taking turns round by round, 10,000 keys. Prints each one's median decisions per second of wall
 * time and of its process's CPU time, with its ratio to RateLimiterMemory's (the median of the
 * rounds' ratios, and their range), and the load average before and after. On a busy machine the
 * CPU figures move less: other processes take turns from a contender, not CPU time.
 *
 *   npm run build && npx tsx bench/memory.ts [--rounds N] [--seconds S] [name filter...]
 */
const { values, positionals } = parseArgs({
  options: { rounds: { type: 'string', default: '7' }, seconds: { type: 'string', default: '1' } },
  allowPositionals: true,
});
const rounds = Number(values.rounds);
const durationMs = Number(values.seconds) * 1000;
const FLEXIBLE = 'rate-limiter-flexible RateLimiterMemory';

const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
const loadBefore = load();
const names = inProcessContenders()
  .map((c) => c.name)
  .filter((name) => name === FLEXIBLE || positionals.length === 0 || positionals.some((p) => name.includes(p)));
const contenders: ContenderProcess[] = [];
try {
  for (const name of names) contenders.push(await startContender({ name, store: 'memory' }));
  const rates = contenders.map(() => [] as InProcessRate[]);
  for (let round = 0; round < rounds; round++) {
    for (let turn = 0; turn < contenders.length; turn++) {
      const i = (turn + round) % contenders.length;
      const contender = contenders[i] as ContenderProcess;
      rates[i]?.push(await contender.measureInProcess({ keys: 10_000, durationMs, warmUpMs: durationMs / 2 }));
    }
  }
  const flexible = rates[names.indexOf(FLEXIBLE)] ?? [];
  console.log(`${rounds} rounds of ${durationMs} ms, 10,000 keys; load average ${loadBefore} before, ${load()} after`);
  console.log(
    `${''.padEnd(42)} ${'wall: /s'.padStart(10)} ratio (rounds)      ${'CPU: /s'.padStart(10)} ratio (rounds)`,
  );
  for (const [i, name] of names.entries()) {
    const list = rates[i] ?? [];
    const column = (rateOf: (rate: InProcessRate) => number) => {
      const ratios = list.map((rate, round) => rateOf(rate) / rateOf(flexible[round] as InProcessRate));
      const range = `(${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)})`;
      return `${Math.round(median(list.map(rateOf)))
        .toLocaleString('en-US')
        .padStart(10)} ${median(ratios).toFixed(2)}x ${range.padEnd(12)}`;
    };
    console.log(`${name.padEnd(42)} ${column((r) => r.perSecond)}   ${column((r) => r.perCpuSecond)}`);
  }
} finally {
  for (const contender of contenders) contender.stop();
}
