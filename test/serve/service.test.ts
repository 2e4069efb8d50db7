import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { startRedisServer, type RedisServer } from '../../src/cli/redis-server.js';
import { InvalidOptionError, memoryStore, redisStore } from '../../src/index.js';
import { InvalidConfigError, createServer, type ServeOptions } from '../../src/serve/index.js';
import { keysWithTtl, uniquePrefix } from '../support/redis.js';
import { configDir, descriptor, rlsClient } from '../support/rls.js';
import { awayFromWindowEnd } from '../support/window-edge.js';
import { PATIENT, useServices, type Service } from '../support/service.js';

// What the service answers, asked of `sluice serve` as users run it: the built command in a
// process of its own, over gRPC and HTTP. The embedding API, createServer(), is tested at the end.

const services = useServices();
let redisServer: RedisServer;
let redis: Redis;
const configs: Awaited<ReturnType<typeof configDir>>[] = [];
before(async () => {
  redisServer = await startRedisServer();
  redis = new Redis(redisServer.url);
});
after(async () => {
  await redis.quit();
  await redisServer.stop();
  await Promise.all(configs.map((config) => config.remove()));
});

/** The flags of a service counting in the test's Redis under `prefix`. */
const onRedis = (prefix = uniquePrefix()) => ['--redis', redisServer.url, '--prefix', prefix, ...PATIENT];

/** Starts `sluice serve` on a configuration of one file, `yaml`, with `flags`. */
async function serve(yaml: string, flags: readonly string[]): Promise<Service> {
  const config = await configDir({ 'config.yaml': yaml });
  configs.push(config);
  return services.start(['--config', config.dir, '--no-watch', ...flags]);
}

const codes = (response: { statuses: { code: string }[] }) => response.statuses.map((s) => s.code);

const ONE_DOMAIN = 'domain: d\ndescriptors:\n  - { key: k, rate_limit: { unit: hour, requests_per_unit: 1 } }\n';

const RULES = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: hour, requests_per_unit: 5 }
  - key: path
    value: /login
    rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: path
    value: /api/*
    rate_limit: { unit: hour, requests_per_unit: 3 }
  - key: path
    rate_limit: { unit: day, requests_per_unit: 10 }
  - key: tenant
    value: free*
    share_threshold: true
    rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: plan
    value: unlimited
    rate_limit: { unlimited: true }
  - key: user
    descriptors:
      - key: action
        value: upload
        rate_limit: { unit: hour, requests_per_unit: 1, name: upload_user }
  - key: org
    rate_limit:
      unit: hour
      requests_per_unit: 4
      replaces: [{ name: upload_user }]
  - key: dry
    shadow_mode: true
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: stacked
    rate_limits:
      - { unit: hour, requests_per_unit: 3 }
      - { unit: day, requests_per_unit: 5 }
`;

describe('sluice serve over gRPC', () => {
  it('admits exactly the limit, and reports current_limit, limit_remaining and duration_until_reset', async () => {
    const { grpc } = await serve(RULES, onRedis());
    const answers = [];
    for (let i = 0; i < 7; i++)
      answers.push(
        await grpc.shouldRateLimit({ domain: 'edge', descriptors: [descriptor(['remote_address', '10.0.0.1'])] }),
      );
    assert.deepEqual(
      answers.map((a) => a.overallCode),
      ['OK', 'OK', 'OK', 'OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT'],
    );
    assert.deepEqual(
      answers.map((a) => a.statuses[0]?.limitRemaining ?? 0),
      [4, 3, 2, 1, 0, 0, 0],
    );
    const [first] = answers[0]?.statuses ?? [];
    assert.deepEqual(first?.currentLimit, { requestsPerUnit: 5, unit: 'HOUR' });
    const reset = first?.durationUntilReset;
    assert.ok(reset && reset.seconds * 1000 + reset.nanos / 1e6 > 0 && reset.seconds < 3600, JSON.stringify(reset));
    // Another address has its own count.
    assert.equal(
      (await grpc.shouldRateLimit({ domain: 'edge', descriptors: [descriptor(['remote_address', '10.0.0.2'])] }))
        .overallCode,
      'OK',
    );
  });

  it('decides a request as one step: a descriptor over its limit leaves the others uncounted', async () => {
    const { grpc } = await serve(RULES, onRedis());
    const both = {
      domain: 'edge',
      descriptors: [descriptor(['remote_address', '10.0.0.9']), descriptor(['path', '/login'])],
    };
    const answers = [];
    for (let i = 0; i < 6; i++) answers.push(await grpc.shouldRateLimit(both));
    assert.deepEqual(
      answers.map((a) => a.overallCode),
      ['OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT', 'OVER_LIMIT', 'OVER_LIMIT'],
    );
    assert.deepEqual(codes(answers[2] as { statuses: { code: string }[] }), ['OK', 'OVER_LIMIT']);
    // The address was counted for the two admitted requests only: 3 of its 5 remain.
    const alone = await grpc.shouldRateLimit({
      domain: 'edge',
      descriptors: [descriptor(['remote_address', '10.0.0.9'])],
    });
    assert.equal(alone.statuses[0]?.limitRemaining, 2);
  });

  it("never takes a denied request's units, even for a moment: a concurrent request on its other descriptor is admitted", async () => {
    const { grpc } = await serve(RULES, onRedis());
    const login = descriptor(['path', '/login']);
    for (let i = 0; i < 2; i++) await grpc.shouldRateLimit({ domain: 'edge', descriptors: [login] });
    const addresses = Array.from({ length: 10 }, (_, i) => `10.0.3.${i}`);
    // Each address keeps one of its 5 units for the second request of its pair.
    for (const address of addresses)
      for (let i = 0; i < 4; i++)
        await grpc.shouldRateLimit({ domain: 'edge', descriptors: [descriptor(['remote_address', address])] });
    // Sent together, the first of each pair before the second: denied by /login, it must not hold
    // the address's last unit while the second is decided.
    const pairs = await Promise.all(
      addresses.map((address) =>
        Promise.all([
          grpc.shouldRateLimit({ domain: 'edge', descriptors: [descriptor(['remote_address', address]), login] }),
          grpc.shouldRateLimit({ domain: 'edge', descriptors: [descriptor(['remote_address', address])] }),
        ]),
      ),
    );
    assert.deepEqual(
      pairs.map(([denied, admitted]) => [denied.overallCode, admitted.overallCode]),
      addresses.map(() => ['OVER_LIMIT', 'OK']),
    );
  });

  it('takes hits_addend units per descriptor, and refuses a cost above the limit', async () => {
    const { grpc } = await serve(RULES, onRedis());
    const ask = (hits: number, perDescriptor?: number) =>
      grpc.shouldRateLimit({
        domain: 'edge',
        hitsAddend: hits,
        descriptors: [
          {
            ...descriptor(['remote_address', '10.0.1.1']),
            ...(perDescriptor ? { hitsAddend: { value: perDescriptor } } : {}),
          },
        ],
      });
    assert.equal((await ask(3)).statuses[0]?.limitRemaining, 2);
    assert.equal((await ask(3)).overallCode, 'OVER_LIMIT');
    // proto3 leaves a field at its default (0) off the wire: absent is 0.
    assert.equal((await ask(3, 2)).statuses[0]?.limitRemaining ?? 0, 0);
    assert.equal((await ask(0, 6)).overallCode, 'OVER_LIMIT');
  });

  it('matches exact values first, then wildcards, then the key alone; shares a wildcard with share_threshold', async () => {
    const { grpc } = await serve(RULES, onRedis());
    const limitOf = async (key: string, value: string) =>
      (await grpc.shouldRateLimit({ domain: 'edge', descriptors: [descriptor([key, value])] })).statuses[0]
        ?.currentLimit;
    assert.deepEqual(await limitOf('path', '/login'), { requestsPerUnit: 2, unit: 'HOUR' });
    assert.deepEqual(await limitOf('path', '/api/users'), { requestsPerUnit: 3, unit: 'HOUR' });
    assert.deepEqual(await limitOf('path', '/home'), { requestsPerUnit: 10, unit: 'DAY' });
    // No rule: OK, without a limit (limit_remaining 0, which proto3 leaves off the wire). Unknown domain: the same.
    assert.deepEqual(await grpc.shouldRateLimit({ domain: 'edge', descriptors: [descriptor(['nobody', 'x'])] }), {
      overallCode: 'OK',
      statuses: [{ code: 'OK' }],
    });
    assert.equal(
      (await grpc.shouldRateLimit({ domain: 'elsewhere', descriptors: [descriptor(['path', '/login'])] })).statuses[0]
        ?.currentLimit,
      undefined,
    );
    // Every value under free* counts against one quota of 2.
    const tenants = [];
    for (const tenant of ['free-a', 'free-b', 'free-c'])
      tenants.push(
        (await grpc.shouldRateLimit({ domain: 'edge', descriptors: [descriptor(['tenant', tenant])] })).overallCode,
      );
    assert.deepEqual(tenants, ['OK', 'OK', 'OVER_LIMIT']);
  });

  it('answers unlimited, replaces, shadow_mode and several limits on one descriptor', async () => {
    const { grpc } = await serve(RULES, onRedis());
    const unlimited = await grpc.shouldRateLimit({
      domain: 'edge',
      descriptors: [descriptor(['plan', 'unlimited'])],
    });
    assert.deepEqual(unlimited.statuses[0], { code: 'OK', limitRemaining: 4294967295 });
    // org replaces upload_user: the user's limit of 1 is not applied, the org's 4 is.
    const userUpload = descriptor(['user', 'u1'], ['action', 'upload']);
    const upload = { domain: 'edge', descriptors: [userUpload, descriptor(['org', 'o1'])] };
    const uploads = [];
    for (let i = 0; i < 5; i++) uploads.push((await grpc.shouldRateLimit(upload)).overallCode);
    assert.deepEqual(uploads, ['OK', 'OK', 'OK', 'OK', 'OVER_LIMIT']);
    const userAlone = { domain: 'edge', descriptors: [userUpload] };
    assert.deepEqual(
      [(await grpc.shouldRateLimit(userAlone)).overallCode, (await grpc.shouldRateLimit(userAlone)).overallCode],
      ['OK', 'OVER_LIMIT'],
    );
    // shadow_mode: over the limit, still OK.
    const dry = [];
    for (let i = 0; i < 3; i++)
      dry.push((await grpc.shouldRateLimit({ domain: 'edge', descriptors: [descriptor(['dry', 'd'])] })).overallCode);
    assert.deepEqual(dry, ['OK', 'OK', 'OK']);
    // 3 per hour and 5 per day, decided together: the third admitted leaves none for the hour.
    const stacked = [];
    for (let i = 0; i < 4; i++)
      stacked.push(await grpc.shouldRateLimit({ domain: 'edge', descriptors: [descriptor(['stacked', 's'])] }));
    assert.deepEqual(stacked.map((a) => a.overallCode).slice(0, 3), ['OK', 'OK', 'OK']);
    assert.deepEqual(stacked[2]?.statuses[0]?.currentLimit, { requestsPerUnit: 3, unit: 'HOUR' });
  });

  it("enforces envoyproxy/ratelimit's newer rules in Redis: a * anywhere, a limit of 0, weeks, shadow_mode at any cost", async () => {
    const yaml = `
domain: newer
descriptors:
  - { key: mid, value: bar*b, rate_limit: { unit: minute, requests_per_unit: 20 } }
  - { key: multi, value: foo*bar*baz, rate_limit: { unit: minute, requests_per_unit: 10 } }
  - { key: ip, value: 50.0.0.5, rate_limit: { unit: second, requests_per_unit: 0 } }
  - { key: weekly, rate_limit: { unit: week, requests_per_unit: 2 } }
  - { key: dry, shadow_mode: true, rate_limit: { unit: hour, requests_per_unit: 1 } }
`;
    const { grpc } = await serve(yaml, onRedis());
    const ask = (key: string, value: string, hitsAddend = 0) =>
      grpc.shouldRateLimit({ domain: 'newer', hitsAddend, descriptors: [descriptor([key, value])] });
    const codesOf = async (times: number, key: string, value: string) => {
      const answers = [];
      for (let i = 0; i < times; i++) answers.push((await ask(key, value)).overallCode);
      return answers;
    };
    await awayFromWindowEnd(60_000, 10_000);
    assert.deepEqual(await codesOf(21, 'mid', 'bar123b'), [...Array<string>(20).fill('OK'), 'OVER_LIMIT']);
    assert.deepEqual(await codesOf(11, 'multi', 'foo1bar2baz'), [...Array<string>(10).fill('OK'), 'OVER_LIMIT']);
    const denied = await ask('ip', '50.0.0.5');
    assert.equal(denied.overallCode, 'OVER_LIMIT');
    // requests_per_unit 0 is proto3's default, so it is left off the wire.
    assert.deepEqual(denied.statuses[0]?.currentLimit, { unit: 'SECOND' });
    const weekly = await ask('weekly', 'w');
    assert.deepEqual(weekly.statuses[0]?.currentLimit, { requestsPerUnit: 2, unit: 'WEEK' });
    assert.ok((weekly.statuses[0]?.durationUntilReset?.seconds ?? 0) <= 7 * 86_400);
    // A cost above a shadow rule's limit is over it, and still answered OK.
    assert.deepEqual((await ask('dry', 'big', 5)).statuses[0]?.code, 'OK');
    // Envoy's override: a week, and 0 per unit, which denies.
    const override = (requestsPerUnit: number, unit: string) =>
      grpc.shouldRateLimit({
        domain: 'newer',
        descriptors: [{ ...descriptor(['client', 'c']), limit: { requestsPerUnit, unit } }],
      });
    assert.deepEqual((await override(3, 'WEEK')).statuses[0]?.limitRemaining, 2);
    assert.equal((await override(0, 'MINUTE')).overallCode, 'OVER_LIMIT');
  });

  it('answers with dynamic_metadata, over gRPC and /json, with --response-dynamic-metadata', async () => {
    const yaml = `
domain: meta
descriptors:
  - key: tier
    value: gold
    rate_limit: { unit: hour, requests_per_unit: 5 }
    metadata: { quota: { name: gold, weight: 2 }, team: payments }
`;
    const { grpc, json } = await serve(yaml, [...onRedis(), '--response-dynamic-metadata']);
    const wire = (await grpc.shouldRateLimit({ domain: 'meta', descriptors: [descriptor(['tier', 'gold'])] })) as {
      dynamicMetadata?: unknown;
    };
    assert.deepEqual(wire.dynamicMetadata, {
      fields: {
        domain: { stringValue: 'meta', kind: 'stringValue' },
        descriptors: {
          kind: 'listValue',
          listValue: {
            values: [
              {
                kind: 'structValue',
                structValue: {
                  fields: {
                    entries: {
                      kind: 'listValue',
                      listValue: { values: [{ kind: 'stringValue', stringValue: 'tier=gold' }] },
                    },
                  },
                },
              },
            ],
          },
        },
        metadata: {
          kind: 'structValue',
          structValue: {
            fields: {
              quota: {
                kind: 'structValue',
                structValue: {
                  fields: {
                    name: { kind: 'stringValue', stringValue: 'gold' },
                    weight: { kind: 'numberValue', numberValue: 2 },
                  },
                },
              },
              team: { kind: 'stringValue', stringValue: 'payments' },
            },
          },
        },
      },
    });
    const answer = await json({ domain: 'meta', descriptors: [{ entries: [{ key: 'tier', value: 'gold' }] }] });
    assert.deepEqual(answer.body.dynamicMetadata, {
      domain: 'meta',
      descriptors: [{ entries: ['tier=gold'] }],
      metadata: { quota: { name: 'gold', weight: 2 }, team: 'payments' },
    });
  });

  it("uses a descriptor's limit override, and shares the key's state", async () => {
    const { grpc } = await serve(RULES, onRedis());
    const overridden = {
      domain: 'edge',
      descriptors: [{ ...descriptor(['remote_address', '10.0.2.1']), limit: { requestsPerUnit: 2, unit: 'HOUR' } }],
    };
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await grpc.shouldRateLimit(overridden));
    assert.deepEqual(
      answers.map((a) => a.overallCode),
      ['OK', 'OK', 'OVER_LIMIT'],
    );
    assert.deepEqual(answers[0]?.statuses[0]?.currentLimit, { requestsPerUnit: 2, unit: 'HOUR' });
    await assert.rejects(
      grpc.shouldRateLimit({
        domain: 'edge',
        descriptors: [{ ...descriptor(['a', 'b']), limit: { requestsPerUnit: 2, unit: 'UNKNOWN' } }],
      }),
      /INVALID_ARGUMENT.*descriptors\[0\]\.limit\.unit/,
    );
  });

  it('reaches every sluice algorithm and any window from YAML', async () => {
    const yaml = `
domain: algos
descriptors:
- { key: a, value: fw, rate_limit: { window: 45d, requests_per_unit: 3 } }
- { key: a, value: sl, rate_limit: { algorithm: sliding_log, window: 90s, requests_per_unit: 3 } }
- { key: a, value: sw, rate_limit: { algorithm: sliding_window, unit: hour, requests_per_unit: 3 } }
- { key: a, value: tb, rate_limit: { algorithm: token_bucket, unit: hour, requests_per_unit: 1, burst: 3 } }
- { key: a, value: gcra, rate_limit: { algorithm: gcra, unit: hour, requests_per_unit: 3 } }
`;
    const { grpc, get } = await serve(yaml, onRedis());
    for (const algorithm of ['fw', 'sl', 'sw', 'tb', 'gcra']) {
      const answers = [];
      for (let i = 0; i < 5; i++)
        answers.push(
          (await grpc.shouldRateLimit({ domain: 'algos', descriptors: [descriptor(['a', algorithm])] })).overallCode,
        );
      assert.deepEqual(answers, ['OK', 'OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT'], algorithm);
    }
    const config = (await get('/rlconfig')).text;
    for (const line of [
      'algos.a_fw: fixed-window 3 per 45d (requests_per_unit=3, unit=UNKNOWN)',
      'algos.a_sl: sliding-log 3 per 90s',
      'algos.a_sw: sliding-window 3 per 1h',
      'algos.a_tb: token-bucket 3 per 3h',
      'algos.a_gcra: gcra 3 per 1h',
    ]) {
      assert.ok(config.includes(line), `${line} in\n${config}`);
    }
  });

  it('adds the draft-11 RateLimit headers to response_headers_to_add when asked', async () => {
    const { grpc } = await serve(RULES, [...onRedis(), '--response-headers']);
    const answer = await grpc.shouldRateLimit({ domain: 'edge', descriptors: [descriptor(['path', '/login'])] });
    assert.deepEqual(
      answer.responseHeadersToAdd?.map((h) => h.key),
      ['RateLimit-Policy', 'RateLimit'],
    );
    assert.equal(answer.responseHeadersToAdd?.[0]?.value, '"2-per-1h";q=2;w=3600');
    assert.match(answer.responseHeadersToAdd?.[1]?.value ?? '', /^"2-per-1h";r=1;t=\d+$/);
  });

  it('blocks a descriptor with the penalty box', async () => {
    const { grpc } = await serve(RULES, [...onRedis(), '--penalty', '1/2h']);
    const login = { domain: 'edge', descriptors: [descriptor(['path', '/login'])] };
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await grpc.shouldRateLimit(login));
    assert.deepEqual(
      answers.map((a) => a.overallCode),
      ['OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT'],
    );
    // Blocked for 2 h after the first denial: longer than any rest of the hour's window.
    assert.ok((answers[3]?.statuses[0]?.durationUntilReset?.seconds ?? 0) > 3600, JSON.stringify(answers[3]));
  });

  it('answers repeat denials from the denied cache', async () => {
    const prefix = uniquePrefix();
    const { grpc } = await serve(RULES, [...onRedis(prefix), '--denied-cache', '100']);
    const login = { domain: 'edge', descriptors: [descriptor(['path', '/login'])] };
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push((await grpc.shouldRateLimit(login)).overallCode);
    // With its state gone from Redis, only the cache can still deny the descriptor.
    await redis.del(...(await keysWithTtl(redis, prefix)).keys());
    answers.push((await grpc.shouldRateLimit(login)).overallCode);
    assert.deepEqual(answers, ['OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT']);
  });

  it('in global shadow mode answers OK while the statuses tell', async () => {
    const { grpc } = await serve(RULES, [...onRedis(), '--shadow']);
    const login = { domain: 'edge', descriptors: [descriptor(['path', '/login'])] };
    await grpc.shouldRateLimit(login);
    await grpc.shouldRateLimit(login);
    const third = await grpc.shouldRateLimit(login);
    assert.deepEqual([third.overallCode, third.statuses[0]?.code], ['OK', 'OVER_LIMIT']);
  });
});

describe('sluice serve over HTTP', () => {
  it('POST /json takes and returns the proto3 JSON mapping: 200, 429, and 400 as problem+json', async () => {
    const { json } = await serve(RULES, onRedis());
    const login = { domain: 'edge', descriptors: [{ entries: [{ key: 'path', value: '/login' }] }] };
    const first = await json(login);
    assert.equal(first.status, 200);
    assert.deepEqual(first.body.statuses, [
      {
        code: 'OK',
        currentLimit: { requestsPerUnit: 2, unit: 'HOUR' },
        limitRemaining: 1,
        durationUntilReset: (first.body.statuses as { durationUntilReset: string }[])[0]?.durationUntilReset,
      },
    ]);
    assert.match(
      (first.body.statuses as { durationUntilReset: string }[])[0]?.durationUntilReset ?? '',
      /^\d+(\.\d{3})?s$/,
    );
    // Original field names are accepted as well as lowerCamel ones.
    assert.equal((await json({ domain: 'edge', hits_addend: 1, descriptors: login.descriptors })).status, 200);
    const denied = await json(login);
    assert.deepEqual([denied.status, denied.body.overallCode], [429, 'OVER_LIMIT']);
    for (const [body, field] of [
      ['{"domain": ', 'body'],
      [{ domain: 'edge', descriptors: [{ entries: [{ key: 'a', value: 1 }] }] }, 'descriptors[0].entries[0].value'],
      [{ domain: 'edge', descriptors: [], extra: 1 }, 'extra'],
      [{ domain: '', descriptors: login.descriptors }, 'domain'],
      [{ domain: 'edge', descriptors: [] }, 'descriptors'],
      [
        {
          domain: 'edge',
          descriptors: [{ entries: [{ key: 'a', value: 'b' }], limit: { requestsPerUnit: 1, unit: 'FORTNIGHT' } }],
        },
        'descriptors[0].limit.unit',
      ],
    ] as const) {
      const bad = await json(body);
      assert.equal(bad.status, 400, JSON.stringify(body));
      assert.equal(bad.type, 'application/problem+json');
      assert.equal(bad.body.status, 400);
      assert.ok(String(bad.body.detail).startsWith(`${field}:`), `${String(bad.body.detail)} names ${field}`);
    }
  });

  it('GET /healthcheck, /metrics and /rlconfig', async () => {
    const { grpc, get } = await serve(RULES, onRedis());
    assert.deepEqual(await get('/healthcheck'), { status: 200, text: 'OK\n' });
    for (let i = 0; i < 3; i++)
      await grpc.shouldRateLimit({ domain: 'edge', descriptors: [descriptor(['path', '/login'])] });
    const metrics = (await get('/metrics')).text;
    assert.ok(
      metrics.includes(
        'sluice_serve_descriptors_total{domain="edge",rule="path_/login",code="OK",shadow_denied="false"} 2\n',
      ),
      metrics,
    );
    assert.ok(
      metrics.includes(
        'sluice_serve_descriptors_total{domain="edge",rule="path_/login",code="OVER_LIMIT",shadow_denied="false"} 1\n',
      ),
      metrics,
    );
    assert.match(metrics, /sluice_requests_denied_total\{sluice_domain="edge",sluice_rule="path_\/login",[^}]*\} 1\n/);
    assert.match(
      metrics,
      /sluice_operation_duration_seconds_count\{sluice_domain="edge",sluice_rule="path_\/login",[^}]*sluice_operation="limit"\} 3\n/,
    );
    assert.match(metrics, /# TYPE sluice_store_errors_total counter\n/);
    const config = await get('/rlconfig');
    assert.equal(config.status, 200);
    assert.ok(
      config.text.includes('edge.path_/login: fixed-window 2 per 1h (requests_per_unit=2, unit=HOUR)\n'),
      config.text,
    );
    assert.equal((await get('/nowhere')).status, 404);
  });
});

describe('sluice serve while Redis is down', () => {
  it('answers /healthcheck 500 and denies with --on-store-error deny, and 200 without', async () => {
    const down = await startRedisServer();
    try {
      // Without an offline queue the service fails a call at once while Redis is down, so the timeout
      // only meets the calls Redis answers: a generous one keeps a loaded machine's slow reply from
      // reading as a failure.
      const flags = ['--redis', down.url, '--timeout', '30s'];
      const denying = await serve(RULES, [...flags, '--on-store-error', 'deny']);
      const allowing = await serve(RULES, flags);
      assert.equal((await denying.get('/healthcheck')).status, 200);
      await down.stop();
      assert.equal((await denying.get('/healthcheck')).status, 500);
      assert.equal((await allowing.get('/healthcheck')).status, 200);
      assert.equal(
        (await denying.grpc.shouldRateLimit({ domain: 'edge', descriptors: [descriptor(['path', '/login'])] }))
          .overallCode,
        'OVER_LIMIT',
      );
    } finally {
      await down.stop();
    }
  });
});

describe('createServer() on a Redis that refuses connections', () => {
  it('counts a refused connection as one, not as a timeout', async () => {
    const down = await startRedisServer();
    await down.stop();
    // An offline queue holds the calls until the timeout: the store then says why no reply came.
    const redis = new Redis(down.url, { retryStrategy: () => 50, maxRetriesPerRequest: null });
    redis.on('error', () => {});
    const config = await configDir({ 'config.yaml': ONE_DOMAIN });
    configs.push(config);
    const server = await createServer({
      config: config.dir,
      store: redisStore(redis),
      grpcPort: 0,
      httpPort: 0,
      host: '127.0.0.1',
      watch: false,
      timeout: 300,
    });
    const grpc = rlsClient(server.grpcPort);
    try {
      const answer = await grpc.shouldRateLimit({ domain: 'd', descriptors: [descriptor(['k', 'v'])] });
      assert.equal(answer.overallCode, 'OK');
      const metrics = await (await fetch(`http://127.0.0.1:${server.httpPort}/metrics`)).text();
      assert.match(metrics, /sluice_store_errors_total\{[^}]*sluice_error_reason="store-error"[^}]*\} 1\n/);
    } finally {
      grpc.close();
      await server.close();
      redis.disconnect();
    }
  });
});

describe('examples/service/ratelimit.yaml', () => {
  it('loads, and decides by its rules', async () => {
    const { grpc } = await services.start(['--config', 'examples/service/ratelimit.yaml', '--no-watch', ...onRedis()]);
    const login = { domain: 'edge', descriptors: [descriptor(['path', '/login'], ['remote_address', '10.1.1.1'])] };
    assert.deepEqual((await grpc.shouldRateLimit(login)).statuses[0]?.currentLimit, {
      requestsPerUnit: 5,
      unit: 'MINUTE',
    });
    assert.equal(
      (await grpc.shouldRateLimit({ domain: 'edge', descriptors: [descriptor(['path', '/healthz'])] })).statuses[0]
        ?.limitRemaining,
      4294967295,
    );
    const exports = [];
    for (let i = 0; i < 4; i++)
      exports.push(
        (await grpc.shouldRateLimit({ domain: 'api', descriptors: [descriptor(['action', 'export'])] })).overallCode,
      );
    assert.deepEqual(exports, ['OK', 'OK', 'OK', 'OVER_LIMIT']);
  });
});

describe('createServer(), the embedding API', () => {
  it('reload() takes a valid change, and refuses a bad one while the old config keeps serving', async () => {
    const lines: string[] = [];
    const config = await configDir({
      'config.yaml': 'domain: hot\ndescriptors:\n  - { key: k, rate_limit: { unit: minute, requests_per_unit: 1 } }\n',
    });
    configs.push(config);
    const server = await createServer({
      config: config.dir,
      store: memoryStore(),
      grpcPort: 0,
      httpPort: 0,
      host: '127.0.0.1',
      watch: false,
      log: (line) => lines.push(line),
    });
    const grpc = rlsClient(server.grpcPort);
    try {
      const ask = async (value: string) =>
        (await grpc.shouldRateLimit({ domain: 'hot', descriptors: [descriptor(['k', value])] })).statuses[0]
          ?.currentLimit?.requestsPerUnit;
      assert.equal(await ask('a'), 1);
      await config.write(
        'config.yaml',
        'domain: hot\ndescriptors:\n  - { key: k, rate_limit: { unit: minute, requests_per_unit: 7 } }\n',
      );
      assert.equal(await server.reload(), true);
      assert.equal(await ask('b'), 7);
      await config.write(
        'config.yaml',
        'domain: hot\ndescriptors:\n  - { key: k, rate_limit: { unit: fortnight, requests_per_unit: 9 } }\n',
      );
      assert.equal(await server.reload(), false);
      assert.equal(await ask('c'), 7);
      assert.match(
        lines.at(-1) ?? '',
        /config .*config\.yaml at descriptors\[0\]\.rate_limit\.unit: must be second, minute, hour, day, week, month or year .*; got "fortnight"; the change is refused and the previous config keeps serving$/,
      );
      // A file that is not config, or the same config again: nothing to reload, nothing logged.
      await config.write(
        'config.yaml',
        'domain: hot\ndescriptors:\n  - { key: k, rate_limit: { unit: minute, requests_per_unit: 7 } }\n',
      );
      assert.equal(await server.reload(), true);
      const logged = lines.length;
      await config.write('serve.log', 'sluice serve: config reloaded\n');
      assert.equal(await server.reload(), true);
      assert.equal(lines.length, logged);
    } finally {
      grpc.close();
      await server.close();
    }
  });

  it('refuses bad options, before anything listens', async () => {
    const config = await configDir({ 'rules.yaml': ONE_DOMAIN });
    const store = memoryStore();
    try {
      for (const [options, message] of [
        [
          { config: config.dir, store, grpcPort: 0, httpPort: 0, shadowMode: true },
          /createServer has no option "shadowMode"/,
        ],
        [
          { config: config.dir, store, grpcPort: 70000 },
          /option "grpcPort" must be a port number from 0 to 65535; got 70000/,
        ],
        [
          { config: config.dir, store, onStoreError: 'fail' },
          /option "onStoreError" must be 'allow' or 'deny'; got "fail"/,
        ],
        [{ config: config.dir, store: {} }, /option "store" must be a store/],
        [{ config: '', store }, /option "config" must be the path of a configuration file or directory/],
      ] as const) {
        await assert.rejects(
          createServer(options as unknown as ServeOptions),
          (error: unknown) => error instanceof InvalidOptionError && message.test(error.message),
        );
      }
    } finally {
      await config.remove();
    }
  });

  it('rejects a bad config with InvalidConfigError, its file, path and value as fields', async () => {
    const config = await configDir({
      'rules.yaml': 'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n',
    });
    configs.push(config);
    await assert.rejects(
      createServer({ config: config.dir, store: memoryStore(), grpcPort: 0, httpPort: 0, watch: false }),
      (error: unknown) => {
        assert.ok(error instanceof InvalidConfigError, String(error));
        assert.equal(error.code, 'SLUICE_INVALID_CONFIG');
        assert.deepEqual(
          [error.file, error.path, error.value],
          [`${config.dir}/rules.yaml`, 'descriptors[0].rate_limit.unit', 'fortnight'],
        );
        return true;
      },
    );
  });
});
