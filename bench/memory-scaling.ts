import type { Redis } from 'ioredis';
import { startRedisServer } from '../src/cli/redis-server.js';
import { TYPICAL, plainCounter, redisContenders, type Contender } from './contenders.js';
import { bytesPerClient } from './run.js';

/*
 * Whether a difference in used_memory per client grows with the clients (bytes per key) or stays
 * the same in all (a fixed allocation, spread thinner over more clients): the plain counter, sluice's
 * fixedWindow and gcra, each on a redis-server of its own, for each client count given.
 *
 *   npm run build && npx tsx bench/memory-scaling.ts 5000 30000
 */
const counts = process.argv.slice(2).map(Number);
if (counts.length === 0 || counts.some((n) => !Number.isInteger(n) || n < 1)) {
  console.error('usage: npx tsx bench/memory-scaling.ts <clients> [clients...]');
  process.exit(2);
}
const picks: ((redis: Redis) => Contender)[] = [
  plainCounter,
  ...['sluice fixedWindow', 'sluice gcra'].map(
    (name) => (redis: Redis) => redisContenders(redis, TYPICAL).find((c) => c.name === name) as Contender,
  ),
];
for (const clients of counts) {
  const totals: number[] = [];
  for (const pick of picks) {
    const server = await startRedisServer();
    let name = '';
    try {
      const { perClient } = await bytesPerClient(
        server.url,
        0,
        (redis) => {
          const contender = pick(redis);
          name = contender.name;
          return contender;
        },
        clients,
      );
      const total = Math.round(perClient * clients);
      totals.push(total);
      const overCounter = total - (totals[0] ?? total);
      console.log(
        `${String(clients).padStart(7)} clients  ${name.padEnd(24)} ${perClient.toFixed(3)} B/client  ${total} B in all  ${overCounter >= 0 ? '+' : ''}${overCounter} B vs the counter`,
      );
    } finally {
      await server.stop();
    }
  }
}
