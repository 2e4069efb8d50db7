import { Redis } from 'ioredis';
import { pathToFileURL } from 'node:url';
import { THROUGHPUT, redisContenders, type Contender } from './contenders.js';
import { instructionsPerDecision } from './instructions.js';

/*
 * The least a lone decision can cost in Redis under sluice's rules, beside rate-limiter-flexible's
 * whole decision, in instructions counted by callgrind (as bench/instructions.ts counts them, one
 * decision at a time):
 *
 *   npx tsx bench/lone-floor.ts
 *
 * Each step is the smallest script that does what its name says, nothing sluice does not need: no
 * helpers, no general ARGV, no junk healing, no penalty box. "fixed window" is the fewest commands a
 * fixed window can run under sluice's rules: it reads the server's clock (TIME), the client's
 * block key, and the counter's TTL (to heal a counter without one, and to tell this window's
 * counter from an older one), then counts. Whatever sluice's real script costs above the last line
 * is its generality; below it nothing can go without breaking a rule.
 */
const STEPS: readonly { readonly name: string; readonly lua: string }[] = [
  { name: 'an empty script, 2 keys and 4 arguments', lua: 'return 1' },
  {
    name: '+ TIME',
    lua: "local t = redis.call('TIME') return {t[1] * 1000 + math.floor(t[2] / 1000)}",
  },
  {
    name: '+ GET of the block key',
    lua: `local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000)
return {now, redis.call('GET', KEYS[1]) and 0 or 1}`,
  },
  {
    name: 'fixed window: + PTTL, INCRBY or SET PX',
    lua: `local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000)
if redis.call('GET', KEYS[1]) then return {now, 0} end
local limit, window = ARGV[1] + 0, ARGV[2] + 0
local resetAfter, count = window - now % window, ARGV[3] + 0
if redis.call('PTTL', KEYS[2]) >= 0 then
  count = redis.call('INCRBY', KEYS[2], ARGV[3])
else
  redis.call('SET', KEYS[2], ARGV[3], 'PX', string.format('%d', resetAfter + 1))
end
return {now, 1, 0, 1, limit - count, resetAfter, 0, 0}`,
  },
];

function step(redis: Redis, index: number, lua: string): Contender {
  const command = `sluiceFloor${index}`;
  redis.defineCommand(command, { numberOfKeys: 2, lua });
  const run = (redis as unknown as Record<string, (...args: string[]) => Promise<unknown>>)[command]?.bind(redis);
  if (run === undefined) throw new Error(`ioredis did not define ${command}`);
  // The bench's throughput quota, a day's window, cost 1, no deadline: as sluice's lone call sends them.
  return {
    name: command,
    library: 'ioredis',
    decide: (key) => run(`bench:{${key}}:b`, `bench:{${key}}:fw`, String(THROUGHPUT.limit), '86400000', '1', '0'),
  };
}

async function main(): Promise<void> {
  const print = (name: string, perDecision: number) =>
    console.log(
      `${name.padEnd(42)} ${Math.round(perDecision).toLocaleString('en-US').padStart(9)} instructions per decision (one at a time)`,
    );
  for (const [index, { name, lua }] of STEPS.entries()) {
    print(name, await instructionsPerDecision((redis) => step(redis, index, lua), true));
  }
  const names = redisContenders(new Redis({ lazyConnect: true })).map((c) => c.name);
  for (const name of ['sluice fixedWindow', 'rate-limiter-flexible RateLimiterRedis']) {
    const index = names.indexOf(name);
    print(
      name,
      await instructionsPerDecision((redis) => redisContenders(redis, THROUGHPUT, '1m')[index] as Contender, true),
    );
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
