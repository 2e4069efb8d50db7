import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { startRedisServer } from '../../src/cli/redis-server.js';
import { useRedis } from '../support/redis.js';
import { get } from './apps.js';

const root = new URL('../../', import.meta.url);
const harness = useRedis();

/** Runs an example as a user would (on the source, through tsx), until it prints where it listens. */
async function runExample(
  file: string,
  redisUrl = harness.server.url,
): Promise<{ url: string; stop(): Promise<void> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', file], {
    cwd: root,
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
