import { startSentinelGroup } from './test/support/sentinel.js';
const t0 = Date.now();
const g = await startSentinelGroup();
console.log('settled in', Date.now() - t0, 'master', await g.settled(), g.servers.map(s => s.port));
await g.stop();
