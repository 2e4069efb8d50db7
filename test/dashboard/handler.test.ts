import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { serve } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { dashboard as expressDashboard } from '../../src/adapters/express.js';
import { dashboard as fastifyDashboard } from '../../src/adapters/fastify.js';
import { dashboard as honoDashboard } from '../../src/adapters/hono.js';
import { dashboard as nodeDashboard } from '../../src/adapters/node.js';
import {
  createDashboard,
  createLimiter,
  dashboardHandler,
  fixedWindow,
  InvalidOptionError,
  memoryStore,
  type DashboardSnapshot,
} from '../../src/index.js';

const TOKEN = 'a-token-of-twenty-chars';

/** A recorder that has seen 3 admitted and 2 denied calls of one key. */
async function recorded(keys?: 'plain' | 'truncate' | 'hash') {
  const recorder = createDashboard(keys ? { keys } : {});
  const limiter = recorder.observe(
    createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 3, window: '1h', name: 'api' }) }),
  );
  for (let i = 0; i < 5; i++) await limiter.limit('user:12345678');
  return recorder;
}

async function listening(server: Server): Promise<string> {
  if (!server.listening) await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const servers: { close(): unknown }[] = [];
after(() => servers.forEach((server) => server.close()));

/** Each framework, serving the dashboard at /dashboard with a token: its base URL. */
const mounts: Record<string, (recorder: Awaited<ReturnType<typeof recorded>>) => Promise<string>> = {
  'node:http': async (recorder) => {
    const show = nodeDashboard(recorder, { token: TOKEN });
    const server = createServer((req, res) => void show(req, res)).listen(0, '127.0.0.1');
    servers.push(server);
    return listening(server);
  },
  Express: async (recorder) => {
    const app = express();
    app.use('/dashboard', expressDashboard(recorder, { token: TOKEN }));
    const server = app.listen(0, '127.0.0.1');
    servers.push(server);
    return listening(server);
  },
  Fastify: async (recorder) => {
    const app = Fastify();
    await app.register(fastifyDashboard, { prefix: '/dashboard', dashboard: recorder, token: TOKEN });
    servers.push(app);
    return app.listen({ port: 0, host: '127.0.0.1' });
  },
  Hono: async (recorder) => {
    const app = new Hono();
    const show = honoDashboard(recorder, { token: TOKEN, getConnInfo });
    app.get('/dashboard', show).get('/dashboard/*', show);
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server;
    servers.push(server);
    return listening(server);
  },
};

for (const [framework, mount] of Object.entries(mounts)) {
  describe(`the dashboard on ${framework}`, () => {
    let base = '';
    before(async () => {
      base = `${await mount(await recorded())}/dashboard`;
    });

    it('serves the page to anyone, and its data only with the bearer token', async () => {
      const page = await fetch(base);
      assert.equal(page.status, 200);
      assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
      assert.match(page.headers.get('content-security-policy') ?? '', /default-src 'none'/);
      assert.match(await page.text(), /<title>sluice dashboard<\/title>/);
      for (const authorization of [undefined, 'Bearer wrong-token-of-twenty-chars', TOKEN]) {
        const refused = await fetch(`${base}/data`, authorization ? { headers: { authorization } } : {});
        assert.equal(refused.status, 401, String(authorization));
        assert.equal(refused.headers.get('www-authenticate'), 'Bearer');
      }
    });

    it('serves the snapshot and the key lookup', async () => {
      const headers = { authorization: `Bearer ${TOKEN}` };
      const snapshot = (await (await fetch(`${base}/data?top=5`, { headers })).json()) as DashboardSnapshot;
      assert.deepEqual(
        snapshot.series.map((s) => [s.name, s.total, s.topUsed, s.topDenied]),
        [
          [
            'sluice/api',
            { admitted: 3, denied: 2, shadowDenied: 0 },
            [{ item: 'user:12345678', count: 5, error: 0 }],
            [{ item: 'user:12345678', count: 2, error: 0 }],
          ],
        ],
      );
      const lookup = (await (await fetch(`${base}/key?key=user%3A12345678`, { headers })).json()) as {
        states: { name: string; decision: { remaining: number; allowed: boolean } }[];
      };
      assert.deepEqual(
        lookup.states.map((s) => [s.name, s.decision.allowed, s.decision.remaining]),
        [['sluice/api', false, 0]],
      );
      assert.equal((await fetch(`${base}/data?top=0`, { headers })).status, 400);
    });
  });
}

describe('the dashboard handler', () => {
  it('answers only loopback clients without a token, and takes GET alone', async () => {
    const handle = dashboardHandler(await recorded());
    const ask = (remoteAddress: string | undefined, method = 'GET') =>
      handle({ method, url: '/dashboard/data', remoteAddress }).then((r) => r.status);
    assert.deepEqual(
      await Promise.all([ask('127.0.0.1'), ask('::1'), ask('::ffff:127.0.0.1'), ask('192.0.2.1'), ask(undefined)]),
      [200, 200, 200, 403, 403],
    );
    assert.equal(await ask('127.0.0.1', 'POST'), 405);
    const open = dashboardHandler(await recorded(), { localOnly: false });
    assert.equal((await open({ method: 'GET', url: '/data', remoteAddress: '192.0.2.1' })).status, 200);
  });

  it('shows keys truncated or hashed', async () => {
    const shown = async (keys: 'truncate' | 'hash') => (await recorded(keys)).snapshot().series[0]?.topUsed[0]?.item;
    assert.equal(await shown('truncate'), 'user:12…');
    assert.match((await shown('hash')) ?? '', /^#[0-9a-f]{12}$/);
    const lookup = await (await recorded('hash')).lookup('user:12345678');
    assert.match(lookup.key, /^#[0-9a-f]{12}$/);
  });

  it('refuses bad options with the option named', () => {
    assert.throws(() => createDashboard({ keys: 'rot13' as 'hash' }), InvalidOptionError);
    assert.throws(() => createDashboard({ history: '2h' }), /history/);
    assert.throws(() => createDashboard({ topKeys: 0 }), /topKeys/);
    assert.throws(() => createDashboard({ colour: 'red' } as object), /colour/);
    assert.throws(() => dashboardHandler(createDashboard(), { token: 'short' }), /token/);
    assert.throws(() => dashboardHandler({} as never), /createDashboard/);
  });
});
