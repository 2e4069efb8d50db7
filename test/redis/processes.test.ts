import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { algorithms } from '../support/algorithms.js';
import { keysWithTtl, uniquePrefix, useRedis } from '../support/redis.js';

const harness = useRedis();
const HAMMER = fileURLToPath(new URL('../support/hammer.ts', import.meta.url));
// Long enough that no fixed window ends and no bucket refills a whole token during the test.
const WINDOW_MS = 300 * 86_400_000;

/** Starts a hammer process and resolves once it is connected and waiting for "go". */
async function hammer(args: readonly string[]) {
  const child = spawn(process.execPath, ['--import', 'tsx', HAMMER, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = once(child, 'exit') as Promise<[number | null]>;
  while (!output.includes('ready\n')) {
    await Promise.race([
      once(child.stdout, 'data'),
      exited.then(([code]) => assert.fail(`hammer exited with ${code} before it was ready`)),
    ]);
  }
  return {
    go: () => child.stdin.write('go\n'),
    async admitted(): Promise<number[]> {
      const [code] = await exited;
      assert.equal(code, 0, output);
      return JSON.parse(output.slice(output.indexOf('ready\n') + 6)) as number[];
    },
  };
}

describe('exactness across processes', () => {
  it('four processes (two ioredis, two node-redis) hammering one key admit exactly the limit, for every algorithm', async () => {
    const prefix = uniquePrefix();
    const limit = 300;
    const url = harness.server.url;
    const processes = await Promise.all(
      ['ioredis', 'node-redis', 'ioredis', 'node-redis'].map((client) =>
        hammer([url, client, prefix, String(limit), String(WINDOW_MS), '400', '20']),
      ),
    );
    for (const p of processes) p.go();
    const admitted = await Promise.all(processes.map((p) => p.admitted()));
    const totals = algorithms.map((_, i) => admitted.reduce((sum, counts) => sum + (counts[i] ?? 0), 0));
    assert.deepEqual(
      totals,
      algorithms.map(() => limit),
      `admitted per process: ${JSON.stringify(admitted)}`,
    );
    for (const [key, ttl] of await keysWithTtl(harness.redis, prefix)) assert.ok(ttl > 0, `${key} has PTTL ${ttl}`);
  });
});
