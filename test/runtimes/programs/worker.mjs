/**
 * A Cloudflare module worker: the shared workload at /work, and at /limited the Hono app limited
 * by sluice/hono, both on the memory store. The test bundles it for the neutral platform (where no
 * Node built-in resolves) and workerd runs it without nodejs_compat: Web-standard APIs alone.
 */
import { Hono } from 'hono';
import { getConnInfo } from 'hono/cloudflare-workers';
import * as sluice from 'sluice';
import { rateLimit } from 'sluice/hono';
import { limitedApp, work } from './workload.mjs';

const app = limitedApp({ sluice, rateLimit, Hono, getConnInfo }, sluice.memoryStore(), 'rt-workerd');
app.get('/work', async (c) => c.json(await work(sluice, sluice.memoryStore(), 'rt-workerd')));

export default app;
