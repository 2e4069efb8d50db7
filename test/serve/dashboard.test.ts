import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { InvalidOptionError, memoryStore } from '../../src/index.js';
import { createServer, type ServeOptions } from '../../src/serve/index.js';

describe("createServer's dashboard option", () => {
  let dir = '';
  let config = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sluice-serve-dashboard-'));
    config = join(dir, 'ratelimit.yaml');
    await writeFile(
      config,
      'domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: day, requests_per_unit: 3 }\n',
    );
  });
  after(() => rm(dir, { recursive: true, force: true }));

  const start = (dashboard: unknown) =>
    createServer({
      config,
      store: memoryStore(),
      grpcPort: 0,
      httpPort: 0,
      host: '127.0.0.1',
      watch: false,
      ...(dashboard === undefined ? {} : { dashboard: dashboard as ServeOptions['dashboard'] }),
    });

  it('is off unless asked for', async () => {
    const server = await start(undefined);
    try {
      assert.equal((await fetch(`http://127.0.0.1:${server.httpPort}/dashboard`)).status, 404);
    } finally {
      await server.close();
    }
  });

  it('takes a token, and then serves its data only with it', async () => {
    const token = 'twenty-characters-ok';
    const server = await start({ token, keys: 'hash' });
    try {
      const base = `http://127.0.0.1:${server.httpPort}/dashboard`;
      assert.equal((await fetch(base)).status, 200);
      assert.equal((await fetch(`${base}/data`)).status, 401);
      const data = await fetch(`${base}/data`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(((await data.json()) as { keys: string }).keys, 'hash');
    } finally {
      await server.close();
    }
  });

  it('refuses what it does not know, naming it', async () => {
    await assert.rejects(start('yes'), InvalidOptionError);
    await assert.rejects(start({ colour: 'red' }), /dashboard has no option "colour"/);
    await assert.rejects(start({ keys: 'rot13' }), /keys/);
  });
});
