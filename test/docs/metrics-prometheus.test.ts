import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startMetricsExample } from '../../examples/metrics-prometheus.js';
import { redisStore } from '../../src/index.js';
import { uniquePrefix, useRedis } from '../support/redis.js';
import { awayFromWindowEnd } from '../support/window-edge.js';

const harness = useRedis();

describe('examples/metrics-prometheus.ts', () => {
  it('serves exact counters and the latency histogram in the Prometheus text format', async () => {
    const prefix = uniquePrefix();
    // The example counts in a one-minute window.
    await awayFromWindowEnd(60_000, 10_000);
    const example = await startMetricsExample({ store: redisStore(harness.redis), port: 0, prefix });
    try {
      const statuses = [];
      for (let i = 0; i < 7; i++) statuses.push((await fetch(`${example.url}/`)).status);
      assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429, 429]);
      const text = await (await fetch(`${example.url}/metrics`)).text();
      const labels = `sluice_prefix="${prefix}",sluice_policy="5-per-1m",sluice_algorithm="fixed-window"`;
      const scope = 'otel_scope_name="sluice"';
      const line = (name: string) => text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(labels));
      assert.equal(line('sluice_requests_allowed_total'), `sluice_requests_allowed_total{${labels},${scope}} 5`);
      assert.equal(line('sluice_requests_denied_total'), `sluice_requests_denied_total{${labels},${scope}} 2`);
      assert.equal(
        line('sluice_operation_duration_count'),
        `sluice_operation_duration_count{${labels},sluice_operation="limit",${scope}} 7`,
      );
      assert.match(text, /# HELP sluice_requests_allowed_total Requests admitted by limit\(\)/);
    } finally {
      await example.stop();
    }
  });
});
