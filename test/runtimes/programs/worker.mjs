/**
 * A Cloudflare module worker: the shared workload at /work, at /limited the Hono app limited by
 * sluice/hono, and an observed limiter whose hook throws at /observed, all on the memory store. The test bundles it for the neutral platform (where no
 * Node built-in resolves) and workerd runs it without nodejs_compat: Web-standard APIs alone.
 */
import { Hono } from 'hono';
import { getConnInfo } from 'hono/cloudflare-workers';
import * as sluice from 'sluice';
import { rateLimit } from 'sluice/hono';
import { limitedApp, work } from './workload.mjs';

const app = limitedApp({ sluice, rateLimit, Hono, getConnInfo }, sluice.memoryStore(), 'rt-workerd');
app.get('/work', async (c) => c.json(await work(sluice, sluice.memoryStore(), 'rt-workerd')));
// A hook that throws: with no process to warn through, sluice warns on the console.
const observed = sluice.observe(sluice.createLimiter({ store: sluice.memoryStore(), policy: sluice.fixedWindow({ limit: 1, window: '1h' }) }), {
  onDecision() {
    throw new Error('hook down');
  },
});
app.get('/observed', async (c) => c.json((await observed.limit('k')).allowed));

export default app;
