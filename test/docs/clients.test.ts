import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startRedisServer } from '../../src/cli/redis-server.js';
import { examplesOf, runExample } from '../support/examples.js';
import { startUpstashBridge } from '../support/upstash.js';

const examples = await examplesOf('docs/clients.md');

describe('docs/clients.md', () => {
  it('shows a snippet for each kind of client', () => {
    for (const from of ['iovalkey', 'redis', '@valkey/valkey-glide', '@upstash/redis']) {
      assert.ok(
        examples.some((example) => example.includes(`from '${from}'`)),
        `no snippet imports ${from}`,
      );
    }
  });

  for (const [i, example] of examples.entries()) {
    it(`snippet ${i} runs as written against a Redis of its own, and prints what its comments say`, async () => {
      const server = await startRedisServer();
      const bridge = await startUpstashBridge(server.port);
      try {
        await runExample(`docs/clients.md snippet ${i}`, example, {
          REDIS_URL: server.url,
          UPSTASH_REDIS_REST_URL: bridge.url,
          UPSTASH_REDIS_REST_TOKEN: bridge.token,
        });
      } finally {
        await bridge.stop();
        await server.stop();
      }
    });
  }
});
