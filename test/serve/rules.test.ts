import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { waitFor } from '../support/cluster.js';
import { uniquePrefix } from '../support/redis.js';
import { descriptor, withConfig } from '../support/rls.js';
import { PATIENT, useServiceRedis, useServices, type Service } from '../support/service.js';

// Rules: `sluice serve` with a leased rule (`lease` under its rate_limit), as processes on a real Redis:
// exact across processes, the hot key's calls mostly kept from Redis, a request's descriptors still
// one decision, and the leases given back on SIGTERM and on reload.

const services = useServices();
const store = useServiceRedis();

const LEASED = (limit: number, units: number) =>
  `domain: edge\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: ${limit}, lease: { units: ${units}, ms: 1h } }\n`;
const WITH_USER = (limit: number, units: number, userLimit: number) =>
  `${LEASED(limit, units)}  - key: u\n    rate_limit: { unit: hour, requests_per_unit: ${userLimit} }\n`;
const ASK_K = { domain: 'edge', descriptors: [descriptor(['k', 'v'])] };
const ASK_K_AND_U = { domain: 'edge', descriptors: [descriptor(['k', 'v']), descriptor(['u', 'a'])] };

/** The count Redis holds for a fixed window descriptor `key=value` under `prefix`. */
const countOf = async (prefix: string, key: string, value = key === 'k' ? 'v' : 'a') =>
  Number(await store.redis.get(`${prefix}:{${JSON.stringify(['edge', key, value])}}:fw`));

/** The scripts Redis has run since the last CONFIG RESETSTAT (each call to the store is one). */
async function scriptCalls(): Promise<number> {
  const info = await store.redis.info('commandstats');
  return [...info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
}

/** `calls` calls, `inFlight` at a time, spread over `running`; resolves with how many were admitted. */
async function admittedOf(running: readonly Service[], request: object, calls: number, inFlight = 32) {
  let sent = 0;
  let admitted = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async (_, caller) => {
      const service = running[caller % running.length] ?? assert.fail();
      while (sent < calls) {
        sent++;
        if ((await service.grpc.shouldRateLimit(request)).overallCode === 'OK') admitted++;
      }
    }),
  );
  return admitted;
}

const serve = (dir: string, prefix: string, ...flags: string[]) =>
  services.start(['--config', dir, '--redis', store.server.url, '--prefix', prefix, ...PATIENT, ...flags]);

describe('sluice serve with a leased rule', () => {
  it('two processes admit at most the limit and at least the limit less 2 leases, Redis running a script per lease', async () => {
    await withConfig(LEASED(1000, 25), async (dir) => {
      const prefix = uniquePrefix();
      const running = await Promise.all([serve(dir, prefix), serve(dir, prefix)]);
      await store.redis.config('RESETSTAT');
      // Below the limit less what two leases hold: every call admitted, about one script per 25
      // (without the lease, about one a call).
      assert.equal(await admittedOf(running, ASK_K, 700, 4), 700);
      const scripts = await scriptCalls();
      assert.ok(scripts <= 700 / 25 + 10, `${scripts} scripts for 700 calls`);
      // Demand past the limit: the rest of it is admitted, less at most what the other process holds.
      const admitted = 700 + (await admittedOf(running, ASK_K, 700));
      assert.ok(admitted <= 1000 && admitted >= 1000 - 2 * 25, `${admitted} admitted of 1,000`);
      assert.equal(await countOf(prefix, 'k'), 1000);
      const metrics = (await running[0]?.get('/metrics'))?.text ?? '';
      assert.match(metrics, /^sluice_leases_taken_total\{sluice_domain="edge",sluice_rule="k",[^}]*\} \d+$/m);
      assert.deepEqual(await Promise.all(running.map((s) => s.stop())), [0, 0]);
      // Given back on SIGTERM, what the leases did not use: the count is what was admitted.
      assert.equal(await countOf(prefix, 'k'), admitted);
    });
  });

  it('gives back what its lease did not use on SIGTERM', async () => {
    await withConfig(LEASED(1000, 100), async (dir) => {
      const prefix = uniquePrefix();
      const service = await serve(dir, prefix);
      assert.equal(await admittedOf([service], ASK_K, 10, 1), 10);
      assert.equal(await countOf(prefix, 'k'), 100);
      assert.equal(await service.stop(), 0);
      assert.equal(await countOf(prefix, 'k'), 10);
    });
  });

  it('gives back what its lease did not use when its configuration changes', async () => {
    await withConfig(LEASED(1000, 100), async (dir, write) => {
      const prefix = uniquePrefix();
      const service = await serve(dir, prefix);
      assert.equal(await admittedOf([service], ASK_K, 10, 1), 10);
      assert.equal(await countOf(prefix, 'k'), 100);
      await write(LEASED(1000, 200));
      await waitFor('the reload', () => service.stderr.some((line) => line.includes('config reloaded')));
      assert.equal(await countOf(prefix, 'k'), 10);
      assert.equal(await admittedOf([service], ASK_K, 1, 1), 1);
      assert.equal(await countOf(prefix, 'k'), 210);
      assert.equal(await service.stop(), 0);
      assert.equal(await countOf(prefix, 'k'), 11);
    });
  });

  it('counts a request in no descriptor when another denies it, leased or not', async () => {
    // The user's limit denies: the leased unit the request took goes back to the store.
    await withConfig(WITH_USER(1000, 50, 3), async (dir) => {
      const prefix = uniquePrefix();
      const service = await serve(dir, prefix);
      const codes = [];
      for (let i = 0; i < 5; i++) codes.push((await service.grpc.shouldRateLimit(ASK_K_AND_U)).overallCode);
      assert.deepEqual(codes, ['OK', 'OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT']);
      assert.deepEqual([await countOf(prefix, 'k'), await countOf(prefix, 'u')], [50 - 2, 3]);
      assert.equal(await service.stop(), 0);
      assert.equal(await countOf(prefix, 'k'), 3);
    });
    // The leased limit denies: the user's limit is only read, not counted.
    await withConfig(WITH_USER(2, 2, 100), async (dir) => {
      const prefix = uniquePrefix();
      const service = await serve(dir, prefix);
      const answers = [];
      for (let i = 0; i < 4; i++) answers.push(await service.grpc.shouldRateLimit(ASK_K_AND_U));
      assert.deepEqual(
        answers.map((a) => [a.overallCode, ...a.statuses.map((s) => s.code)]),
        [
          ['OK', 'OK', 'OK'],
          ['OK', 'OK', 'OK'],
          ['OVER_LIMIT', 'OVER_LIMIT', 'OK'],
          ['OVER_LIMIT', 'OVER_LIMIT', 'OK'],
        ],
      );
      assert.deepEqual([await countOf(prefix, 'k'), await countOf(prefix, 'u')], [2, 2]);
      assert.equal(await service.stop(), 0);
    });
  });

  it('is refused beside --penalty, before the service listens', async () => {
    await withConfig(LEASED(1000, 100), async (dir) => {
      const { code, stderr } = await services.runToExit(['--config', dir, '--penalty', '5/1m']);
      assert.deepEqual(
        { code, stderr: stderr.map((line) => line.replaceAll(dir, '<dir>')) },
        {
          code: 2,
          stderr: [
            'sluice: config <dir>/rules.yaml at descriptors[0].rate_limit.lease: is refused with --penalty (createServer: penalty): leases admit without the store, so denials would not be in a row, and a block would not stop the leases at once',
          ],
        },
      );
    });
  });
});
