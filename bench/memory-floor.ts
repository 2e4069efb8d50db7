import { RateLimiterMemory } from 'rate-limiter-flexible';
import { createLimiter, fixedWindow, memoryStore } from '../dist/esm/index.js';
import { keysFor, measureInProcess, median } from './measure.js';

/*
 * What any in-process limiter must do per decision, and nothing more: read the clock, find the
 * key's state in a Map of 10,000, change a number, resolve the promise the caller awaits. Beside it,
 * RateLimiterMemory and sluice's memory store, measured alike (docs/performance.md, "In process").
 *
 *   npm run build && npx tsx bench/memory-floor.ts
 */
const keys = keysFor(10_000);
const states = new Map(keys.map((key) => [key, { count: 0 }]));
const flexible = new RateLimiterMemory({ points: 1e9, duration: 86_400 });
const sluice = createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 1e9, window: '1d' }) });

const contenders: [string, (key: string) => Promise<unknown>][] = [
  [
    'floor: clock, Map lookup, count, promise',
    (key) => {
      const state = states.get(key) as { count: number };
      state.count += Date.now() & 1;
      return Promise.resolve(state);
    },
  ],
  ['rate-limiter-flexible RateLimiterMemory', (key) => flexible.consume(key)],
  ['sluice memoryStore fixedWindow', (key) => sluice.limit(key)],
];
const rates = new Map<string, number[]>(contenders.map(([name]) => [name, []]));
for (let round = 0; round < 5; round++) {
  for (const [name, decide] of contenders)
    rates.get(name)?.push((await measureInProcess(decide, keys, 1000)).perSecond);
}
const flexibleRate = median(rates.get(contenders[1]?.[0] ?? '') ?? []);
for (const [name, list] of rates) {
  const rate = median(list);
  console.log(
    `${name.padEnd(42)} ${Math.round(rate).toLocaleString('en-US').padStart(10)} /s  ${(rate / flexibleRate).toFixed(2)}x RateLimiterMemory`,
  );
}
