import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { copyFile, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import { startRedisServer } from '../../src/cli/redis-server.js';
import { useRedis } from '../support/redis.js';
import { get } from '../adapters/apps.js';

const root = new URL('../../', import.meta.url);
const harness = useRedis();

/**
 * Runs an example as a user would (on the source, through tsx; in `cwd`, this repository unless
 * said), until it prints where it listens.
 */
async function runExample(
  file: string,
  redisUrl = harness.server.url,
  { cwd = root, tsx = ['--import', 'tsx'] }: { cwd?: URL | string; tsx?: string[] } = {},
): Promise<{ url: string; stop(): Promise<void> }> {
  const child = spawn(process.execPath, [...tsx, file], {
    cwd,
    env: { ...process.env, PORT: '0', REDIS_URL: redisUrl },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match?.[1]) resolve(match[1]);
    });
    child.once('exit', (code) => reject(new Error(`${file} exited with ${code}: ${output}`)));
  });
  return {
    url,
    async stop() {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}

describe('examples', () => {
  ['express', 'fastify', 'hono', 'koa', 'nestjs', 'node'].forEach((name, i) => {
    it(`examples/${name}.ts runs, limits a client to 5 a minute, and is the code docs/middleware/${name}.md shows`, async () => {
      const code = await readFile(new URL(`examples/${name}.ts`, root), 'utf8');
      const page = await readFile(new URL(`docs/middleware/${name}.md`, root), 'utf8');
      assert.ok(page.includes(`\`\`\`ts\n${code}\`\`\``), `docs/middleware/${name}.md shows examples/${name}.ts`);
      const example = await runExample(`examples/${name}.ts`);
      try {
        // Every example shares one Redis: each sends from its own loopback address, so its own key.
        const from = `127.0.1.${i + 1}`;
        const replies = [];
        for (let n = 0; n < 6; n++) replies.push(await get(`${example.url}/`, { from }));
        assert.deepEqual(
          replies.map((reply) => reply.status),
          [200, 200, 200, 200, 200, 429],
        );
        assert.equal(replies[0]?.body, 'hello');
        assert.match(String(replies[4]?.headers.ratelimit), /^"per-minute";r=0;t=\d+$/);
        assert.equal(replies[5]?.headers['retry-after'] !== undefined, true);
      } finally {
        await example.stop();
      }
    });

    it(`examples/${name}.ts fails fast while Redis is down: each request answered well within the limiter's 1 s timeout`, async () => {
      const server = await startRedisServer();
      const example = await runExample(`examples/${name}.ts`, server.url);
      try {
        assert.equal((await get(`${example.url}/`)).status, 200);
        await server.stop();
        for (let n = 0; n < 4; n++) {
          const start = performance.now();
          const reply = await get(`${example.url}/`);
          // Failing open, as the limiter does by default; with an offline queue this took the whole timeout,
          // so answered under it is fast enough (a tighter bound is a speed target a loaded machine misses).
          assert.equal(reply.status, 200);
          assert.ok(performance.now() - start < 1000, `request ${n} took ${Math.round(performance.now() - start)} ms`);
        }
      } finally {
        await example.stop();
        await server.stop();
      }
    });
  });
});

describe('docs/middleware/nestjs.md', () => {
  it('names, before its code, the compiler option an app of its own needs: without it the example fails to load, with the tsconfig.json shown it serves', async () => {
    const page = await readFile(new URL('docs/middleware/nestjs.md', root), 'utf8');
    const tsconfig = /```json\n([^]*?)```/.exec(page);
    assert.ok(tsconfig && tsconfig.index < page.indexOf('```ts'), 'a tsconfig.json shown before the code');
    // Outside this repository, whose own tsconfig.json sets the option; the packages linked from here.
    const dir = await mkdtemp(join(tmpdir(), 'sluice-nest-app-'));
    const path = (relative: string) => fileURLToPath(new URL(relative, root));
    try {
      await mkdir(join(dir, 'node_modules', '@nestjs'), { recursive: true });
      for (const name of ['ioredis', '@nestjs/common', '@nestjs/core'])
        await symlink(path(`node_modules/${name}`), join(dir, 'node_modules', name));
      await symlink(path('.'), join(dir, 'node_modules', 'sluice'));
      await writeFile(join(dir, 'package.json'), '{ "type": "module" }\n');
      await copyFile(path('examples/nestjs.ts'), join(dir, 'app.ts'));
      const tsx = [path('node_modules/tsx/dist/cli.mjs')];
      const env = { ...process.env, PORT: '0', REDIS_URL: harness.server.url };
      const without = await promisify(execFile)(process.execPath, [...tsx, 'app.ts'], { cwd: dir, env }).then(
        () => ({ stderr: 'it ran' }),
        (error: { stderr: string }) => error,
      );
      assert.match(without.stderr, /Cannot read properties of undefined \(reading 'value'\)/);
      await writeFile(join(dir, 'tsconfig.json'), tsconfig[1] ?? '');
      const example = await runExample('app.ts', harness.server.url, { cwd: dir, tsx });
      try {
        assert.equal((await get(`${example.url}/`, { from: '127.0.1.99' })).status, 200);
      } finally {
        await example.stop();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
