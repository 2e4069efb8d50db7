import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { startRedisServer } from './src/cli/redis-server.js';
import { createLimiter, fixedWindow, redisStore } from './src/index.js';
const server = await startRedisServer();
const admin = new Redis(server.url);
await admin.call('ACL', 'SETUSER', 'u', 'on', '>pw', 'resetkeys', '~p:*', '-@all', '+evalsha', '+eval', '+get', '+set', '+pttl');
const io = new Redis({ port: server.port, host: '127.0.0.1', username: 'u', password: 'pw' });
const nr = createClient({ url: `redis://u:pw@127.0.0.1:${server.port}` });
await nr.connect();
for (const [name, c] of [['io', io], ['nr', nr]] as const) {
  for (const prefix of ['p', 'q']) {
    const l = createLimiter({ store: redisStore(c), policy: fixedWindow({ limit: 5, window: 1000 }), prefix, onStoreError: 'deny', hooks: { storeError: () => {} } });
    const d = await l.limit('k');
    console.log(name, prefix, d.error?.message, (d.error?.cause as Error)?.constructor.name);
    await l.reset('k').catch((e: Error) => console.log('reset', e.message));
  }
}
console.log(await admin.call('ACL', 'LOG'));
await io.quit(); await nr.quit(); await admin.quit(); await server.stop();
