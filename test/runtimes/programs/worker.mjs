/**
 * A Cloudflare module worker: a Hono app limited by sluice/hono with the memory store, and the
 * shared workload at /work. Bundled by esbuild for the neutral platform (no Node built-ins to
 * resolve) and run by workerd without nodejs_compat: Web-standard APIs alone.
 */
import { Hono } from 'hono';
import { getConnInfo } from 'hono/cloudflare-workers';
import * as sluice from 'sluice';
import { rateLimit } from 'sluice/hono';
import { work } from './workload.mjs';

const app = new Hono();
// Clients by address (Cloudflare's CF-Connecting-IP), an IPv6 client by its /56: three requests an hour.
const limiter = sluice.createLimiter({ store: sluice.memoryStore(), policy: sluice.fixedWindow({ limit: 3, window: '1h' }) });
app.use('/limited', rateLimit({ limiter, getConnInfo, headers: 'draft-8' }));
app.get('/limited', (c) => c.text('hello'));
app.get('/work', async (c) => c.json(await work(sluice, sluice.memoryStore(), 'rt-workerd')));

export default app;
