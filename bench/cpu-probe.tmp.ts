import { Redis } from 'ioredis';
import { startRedisServer } from '../src/cli/redis-server.js';
import { redisContenders, incrCeiling } from './contenders.js';
import { measure } from './measure.js';
const server = await startRedisServer();
const redis = new Redis(server.url, { enableAutoPipelining: true });
const keys = Array.from({ length: 10000 }, (_, i) => `user:${i}`);
async function redisCpu() { const info = await redis.info('cpu'); return Number(/used_cpu_user:([\d.]+)/.exec(info)![1]) + Number(/used_cpu_sys:([\d.]+)/.exec(info)![1]); }
const list = [...redisContenders(redis), incrCeiling(redis)].filter(c => process.argv.slice(2).length === 0 || process.argv.slice(2).some(a => c.name.includes(a)));
for (const c of list) await measure(c.decide, keys, 64, 300);
for (let r = 0; r < 2; r++) for (const c of list) {
  const r0 = await redisCpu(); const n0 = process.cpuUsage();
  const s = await measure(c.decide, keys, 256, 1500);
  const r1 = await redisCpu(); const n1 = process.cpuUsage(n0);
  const count = s.decisionsPerSecond * 1.5;
  console.log(c.name.padEnd(42), Math.round(s.decisionsPerSecond), 'redis us/op', ((r1 - r0) * 1e6 / count).toFixed(2), 'node us/op', ((n1.user + n1.system) / count).toFixed(2));
}
redis.disconnect(); await server.stop();
