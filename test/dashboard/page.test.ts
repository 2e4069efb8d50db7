import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { chromium, type Browser, type Page } from 'playwright-core';
import { dashboard as nodeDashboard } from '../../src/adapters/node.js';
import type { RedisServer } from '../../src/cli/redis-server.js';
import { PAGE } from '../../src/dashboard/page.js';
import {
  createDashboard,
  createLimiter,
  fixedWindow,
  redisStore,
  type Dashboard,
  type Limiter,
} from '../../src/index.js';
import { startTestServer } from '../support/servers.js';

const CHROMIUM = '/usr/bin/chromium';
const noChromium = existsSync(CHROMIUM) ? false : `${CHROMIUM} is not installed (apt-get install -y chromium)`;
// Screenshots are the test's artefacts (git-ignored); docs/images/dashboard.png is one of them, made smaller.
const ARTEFACTS = 'test-results/dashboard';

/** The DOM as far as the page scripts below read it (the program has no DOM lib: src must not see one). */
interface PageElement {
  querySelectorAll(selector: string): Iterable<PageElement> & ArrayLike<PageElement>;
  readonly textContent: string | null;
}
declare const document: PageElement;
declare const axe: { run(): Promise<{ violations: { id: string; nodes: unknown[] }[] }> };

/** Each row of a table, its cells' text. */
function tableText(page: Page, id: string): Promise<string[][]> {
  return page.$$eval(`#${id} tbody tr`, (rows: PageElement[]) =>
    rows.map((row) => [...row.querySelectorAll('th, td')].map((cell) => cell.textContent ?? '')),
  );
}

/** Waits until table `id`'s first columns read `expected` (the page polls each second). */
async function waitForTable(page: Page, id: string, expected: string[][]): Promise<void> {
  const columns = expected[0]?.length ?? 0;
  await page
    .waitForFunction(
      ([table, want, width]) =>
        JSON.stringify(
          [...document.querySelectorAll(`#${table} tbody tr`)].map((row) =>
            [...row.querySelectorAll('th, td')].slice(0, width).map((cell) => cell.textContent),
          ),
        ) === want,
      [id, JSON.stringify(expected), columns] as const,
      { timeout: 60_000 },
    )
    .catch(async (error: unknown) => {
      const shown = (await tableText(page, id)).map((row) => row.slice(0, columns));
      assert.deepEqual(shown, expected, String(error));
    });
}

describe('the dashboard page in Chromium', { skip: noChromium }, () => {
  let redisServer: RedisServer;
  let redis: Redis;
  let server: Server;
  let browser: Browser;
  let base = '';
  let recorder: Dashboard;
  let api: Limiter;
  let shadowed: Limiter;
  const prefix = `dash${process.pid}`;

  before(async () => {
    redisServer = await startTestServer();
    // Fails a call at once while the server is down, so the failure policy answers it.
    redis = new Redis(redisServer.port, '127.0.0.1', { enableOfflineQueue: false, maxRetriesPerRequest: 0 });
    redis.on('error', () => undefined);
    await once(redis, 'ready');
    recorder = createDashboard();
    const store = redisStore(redis);
    api = recorder.observe(
      createLimiter({ store, prefix, policy: fixedWindow({ limit: 5, window: '1h', name: 'api' }) }),
    );
    shadowed = recorder.observe(
      createLimiter({ store, prefix, shadow: true, policy: fixedWindow({ limit: 2, window: '1h', name: 'beta' }) }),
    );
    const show = nodeDashboard(recorder);
    server = createServer((req, res) => {
      if (req.url?.startsWith('/dashboard')) void show(req, res);
      else res.writeHead(404).end();
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu'],
    });
    await mkdir(ARTEFACTS, { recursive: true });
  });
  after(async () => {
    await browser?.close();
    server?.close();
    redis?.disconnect();
    await redisServer?.stop();
  });

  /** `times` calls for `key`, one after another. */
  async function load(limiter: Limiter, key: string, times: number): Promise<void> {
    for (let i = 0; i < times; i++) await limiter.limit(key);
  }

  it('is one page under 100 kB', () => {
    assert.ok(Buffer.byteLength(PAGE) < 100_000, `${Buffer.byteLength(PAGE)} bytes`);
  });

  it('loads nothing from the network, shows the load exactly, updates with it, and passes axe', async () => {
    await load(api, 'alice', 12);
    await load(api, 'bob', 3);
    await load(api, 'carol', 8);
    await load(shadowed, 'dave', 4);
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    const elsewhere: string[] = [];
    await page.route('**/*', (route) => {
      const url = route.request().url();
      if (url.startsWith(`${base}/`)) return route.continue();
      elsewhere.push(url);
      return route.abort();
    });
    const requested: string[] = [];
    page.on('request', (request) => requested.push(request.url()));
    await page.goto(`${base}/dashboard`);
    await waitForTable(page, 'series-table', [
      [`${prefix}/api`, '13', '10', '0'],
      [`${prefix}/beta`, '2', '0', '2'],
    ]);
    assert.deepEqual(await tableText(page, 'top-denied'), [
      ['alice', `${prefix}/api`, '7', '0'],
      ['carol', `${prefix}/api`, '3', '0'],
      ['dave', `${prefix}/beta`, '2', '0'],
    ]);
    assert.deepEqual((await tableText(page, 'top-used')).slice(0, 2), [
      ['alice', `${prefix}/api`, '12', '0'],
      ['carol', `${prefix}/api`, '8', '0'],
    ]);
    assert.match(await page.locator('#rules').innerText(), /\/api: fixed-window 5 per 1h/);

    // The load changes: bob goes over his limit, and the store fails for a while.
    await load(api, 'bob', 5);
    await redisServer.kill();
    await load(api, 'erin', 3);
    await redisServer.restart();
    if (redis.status !== 'ready') await once(redis, 'ready');
    await load(api, 'erin', 1);
    await waitForTable(page, 'series-table', [
      [`${prefix}/api`, '19', '13', '0'],
      [`${prefix}/beta`, '2', '0', '2'],
    ]);
    await page.waitForFunction(() => document.querySelectorAll('#outages tbody tr').length === 1);
    const [outage] = await tableText(page, 'outages');
    assert.deepEqual(outage?.slice(2), ['store-error', '3', '3', '0']);
    assert.notEqual(outage?.[1], 'ongoing');
    assert.equal(await page.locator('#store-pill').innerText(), 'up');

    // A lookup reads with peek: erin (one call since the restart emptied Redis) keeps 4 of 5, and a
    // key never seen is not created.
    await page.fill('#lookup-key', 'erin');
    await page.click('#lookup button');
    await page.waitForSelector('#lookup-result table');
    assert.deepEqual((await tableText(page, 'lookup-result table'))[0]?.slice(0, 5), [
      `${prefix}/api`,
      'api',
      'yes',
      '4',
      '5',
    ]);
    await page.fill('#lookup-key', 'zed');
    await page.click('#lookup button');
    await page.waitForFunction(() =>
      /zed/.test(document.querySelectorAll('#lookup-result caption')[0]?.textContent ?? ''),
    );
    assert.deepEqual(await redis.keys(`*zed*`), []);
    await page.screenshot({ path: `${ARTEFACTS}/dashboard.png`, fullPage: true });

    const axeSource = await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
    await page.addScriptTag({ content: axeSource });
    const { violations } = await page.evaluate(() => axe.run());
    assert.deepEqual(
      violations.map((v) => `${v.id} (${v.nodes.length})`),
      [],
    );
    assert.deepEqual(elsewhere, []);
    assert.ok(
      requested.every((url) => url.startsWith(`${base}/dashboard`)),
      requested.filter((url) => !url.startsWith(base)).join(' '),
    );

    // A burst past 1,000 decisions in a second: the page says its keys were sampled.
    assert.doesNotMatch(await page.locator('#bound').innerText(), /sampl|1 in/);
    await Promise.all(Array.from({ length: 3000 }, (_, i) => api.limit(`burst${i % 5}`)));
    await page.waitForFunction(() =>
      /1 in 32 is counted/.test(document.querySelectorAll('#bound')[0]?.textContent ?? ''),
    );
    await page.close();
  });
});
