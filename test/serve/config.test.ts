import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { memoryStore } from '../../src/index.js';
import { InvalidConfigError, createServer, parseConfig, type ServeOptions } from '../../src/serve/index.js';
import { configDir, descriptor, rlsClient, type WireResponse } from '../support/rls.js';

// envoyproxy/ratelimit's own configurations, as a platform team moving from it brings them: its
// README (the descriptor list definition and Examples 1 to 11) and every file of its test/config,
// each written here from what the README says or what that server's tests check of it. Each loads
// and behaves as that server documents, or is refused at load with the file, the place and why.
// Nothing may load and then go unenforced. (Where sluice differs on purpose, docs/service.md says.)

// Counts kept in memory on a frozen clock: every call of a case lands in one window.
const NOW = Date.UTC(2026, 5, 1, 12, 0, 0, 250);

type Entries = [string, string][];

interface Serving {
  /** One ShouldRateLimit call over gRPC, of one descriptor per entry list. */
  ask(domain: string, ...descriptors: Entries[]): Promise<WireResponse>;
  /** The overall codes of `times` calls of the same request, one after another. */
  codes(times: number, domain: string, ...descriptors: Entries[]): Promise<string[]>;
  /** POST /json. */
  json(body: unknown): Promise<Record<string, unknown>>;
  /** The descriptors counted per rule name in /metrics: `rule code` lines. */
  ruleNames(): Promise<string[]>;
}

/** Serves `files` (name to YAML) for `use`, on a memory store and a frozen clock, then stops. */
async function serving(
  files: Record<string, string>,
  use: (s: Serving) => Promise<void>,
  options: Partial<ServeOptions> = {},
): Promise<void> {
  const config = await configDir(files);
  const server = await createServer({
    config: config.dir,
    store: memoryStore({ now: () => NOW }),
    grpcPort: 0,
    httpPort: 0,
    host: '127.0.0.1',
    watch: false,
    ...options,
  });
  const client = rlsClient(server.grpcPort);
  const http = `http://127.0.0.1:${server.httpPort}`;
  const ask = (domain: string, ...descriptors: Entries[]) =>
    client.shouldRateLimit({ domain, descriptors: descriptors.map((entries) => descriptor(...entries)) });
  try {
    await use({
      ask,
      async codes(times, domain, ...descriptors) {
        const codes: string[] = [];
        for (let i = 0; i < times; i++) codes.push((await ask(domain, ...descriptors)).overallCode);
        return codes;
      },
      json: async (body) =>
        (await (await fetch(`${http}/json`, { method: 'POST', body: JSON.stringify(body) })).json()) as Record<
          string,
          unknown
        >,
      async ruleNames() {
        const text = await (await fetch(`${http}/metrics`)).text();
        return [...text.matchAll(/^sluice_serve_descriptors_total\{[^}]*rule="([^"]*)",code="(\w+)"/gm)].map(
          ([, rule, code]) => `${rule} ${code}`,
        );
      },
    });
  } finally {
    client.close();
    await server.close();
    await config.remove();
  }
}

/** Asserts that `files` are refused at load, at `path` of `file`, for `reason`. */
async function refused(files: Record<string, string>, file: string, path: string, reason: RegExp): Promise<void> {
  const config = await configDir(files);
  try {
    await assert.rejects(
      createServer({ config: config.dir, store: memoryStore(), grpcPort: 0, httpPort: 0, watch: false }),
      (error: unknown) => {
        assert.ok(error instanceof InvalidConfigError, String(error));
        assert.equal(error.file, `${config.dir}/${file}`);
        assert.equal(error.path, path);
        assert.match(error.message, reason);
        return true;
      },
    );
  } finally {
    await config.remove();
  }
}

/** `n` admissions, then one denial. */
const upTo = (n: number) => [...Array<string>(n).fill('OK'), 'OVER_LIMIT'];
const limitOf = (response: WireResponse, i = 0) => response.statuses[i]?.currentLimit;

describe("envoyproxy/ratelimit's README", () => {
  it('the descriptor list definition: every field it lists loads and acts', async () => {
    const yaml = `
domain: definition
descriptors:
  - key: route
    value: api*
    share_threshold: true
    value_to_metric: true
    detailed_metric: false
    shadow_mode: false
    descriptors:
      - key: user
        rate_limit:
          name: per_user
          unit: minute
          requests_per_unit: 2
  - key: vip
    rate_limit:
      replaces:
        - name: per_user
      unit: minute
      requests_per_unit: 3
`;
    await serving({ 'config.yaml': yaml }, async (s) => {
      // Every api* route shares one count per user.
      assert.deepEqual(
        [
          ...(await s.codes(1, 'definition', [
            ['route', 'api1'],
            ['user', 'u'],
          ])),
          ...(await s.codes(2, 'definition', [
            ['route', 'api2'],
            ['user', 'u'],
          ])),
        ],
        upTo(2),
      );
      // With the vip descriptor, per_user is replaced: 3 of its own, per_user untouched.
      assert.deepEqual(
        await s.codes(
          4,
          'definition',
          [
            ['route', 'api1'],
            ['user', 'v'],
          ],
          [['vip', 'v']],
        ),
        upTo(3),
      );
      assert.equal(
        (
          await s.ask('definition', [
            ['route', 'api1'],
            ['user', 'v'],
          ])
        ).statuses[0]?.limitRemaining,
        1,
      );
      assert.ok((await s.ruleNames()).includes('route_api*.user OK'));
    });
  });

  it('the rate limit definition: second, minute, hour and day, and week, month and year as that server counts them', async () => {
    const units = ['second', 'minute', 'hour', 'day', 'week', 'month', 'year'];
    const days = { week: 7, month: 30, year: 365 } as Record<string, number>;
    const yaml = `domain: units\ndescriptors:\n${units.map((u) => `  - { key: ${u}, rate_limit: { unit: ${u}, requests_per_unit: 1 } }\n`).join('')}`;
    await serving({ 'config.yaml': yaml }, async (s) => {
      for (const unit of units) {
        const first = await s.ask('units', [[unit, 'x']]);
        assert.deepEqual(limitOf(first), { requestsPerUnit: 1, unit: unit.toUpperCase() });
        assert.equal((await s.ask('units', [[unit, 'x']])).overallCode, 'OVER_LIMIT', unit);
        const reset = Number(first.statuses[0]?.durationUntilReset?.seconds);
        if (unit in days) assert.ok(reset > 0 && reset <= (days[unit] as number) * 86_400, `${unit}: ${reset}`);
      }
    });
    await refused(
      {
        'config.yaml':
          'domain: d\ndescriptors:\n  - { key: k, rate_limit: { unit: fortnight, requests_per_unit: 1 } }\n',
      },
      'config.yaml',
      'descriptors[0].rate_limit.unit',
      /must be second, minute, hour, day, week, month or year/,
    );
  });

  it('Example 1: two values of one key, 500 a second each', async () => {
    const yaml = `
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit: { unit: second, requests_per_unit: 500 }
  - key: database
    value: default
    rate_limit: { unit: second, requests_per_unit: 500 }
`;
    await serving({ 'config.yaml': yaml }, async (s) => {
      assert.deepEqual(await s.codes(501, 'mongo_cps', [['database', 'users']]), upTo(500));
      assert.equal((await s.ask('mongo_cps', [['database', 'default']])).statuses[0]?.limitRemaining, 499);
      assert.equal(limitOf(await s.ask('mongo_cps', [['database', 'other']])), undefined);
    });
  });

  it('Example 2: nested descriptors, and two descriptors in one request', async () => {
    const yaml = `
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: { unit: day, requests_per_unit: 5 }
  - key: to_number
    rate_limit: { unit: day, requests_per_unit: 100 }
`;
    await serving({ 'config.yaml': yaml }, async (s) => {
      const marketing: Entries = [
        ['message_type', 'marketing'],
        ['to_number', '2061111111'],
      ];
      const number: Entries = [['to_number', '2061111111']];
      assert.deepEqual(await s.codes(6, 'messaging', marketing, number), upTo(5));
      // Each number has its own 5; the denied request counted nothing (that server would count it).
      assert.equal(
        (
          await s.ask('messaging', [
            ['message_type', 'marketing'],
            ['to_number', '2062222222'],
          ])
        ).overallCode,
        'OK',
      );
      assert.equal((await s.ask('messaging', number)).statuses[0]?.limitRemaining, 94);
    });
  });

  it('Example 3: the most specific value first, and a deny-listed address (requests_per_unit: 0)', async () => {
    const yaml = `
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 10 }
  - key: remote_address
    value: 50.0.0.5
    rate_limit: { unit: second, requests_per_unit: 0 }
`;
    await serving({ 'config.yaml': yaml }, async (s) => {
      assert.deepEqual(await s.codes(11, 'edge_proxy_per_ip', [['remote_address', '50.0.0.1']]), upTo(10));
      const denied = await s.ask('edge_proxy_per_ip', [['remote_address', '50.0.0.5']]);
      assert.equal(denied.overallCode, 'OVER_LIMIT');
      // requests_per_unit 0 is proto3's default, so it is left off the wire.
      assert.deepEqual(limitOf(denied), { unit: 'SECOND' });
      assert.equal(denied.statuses[0]?.limitRemaining ?? 0, 0);
      // Denied with another descriptor: the other is not counted.
      await s.ask('edge_proxy_per_ip', [['remote_address', '50.0.0.5']], [['remote_address', '50.0.0.2']]);
      assert.equal((await s.ask('edge_proxy_per_ip', [['remote_address', '50.0.0.2']])).statuses[0]?.limitRemaining, 9);
    });
  });

  it('Example 4: a descriptor matches a rule only with as many entries as the rule has levels', async () => {
    const flat =
      'domain: example4\ndescriptors:\n  - key: key\n    value: value\n    rate_limit: { requests_per_unit: 300, unit: second }\n';
    const nested =
      'domain: example4\ndescriptors:\n  - key: key\n    value: value\n    descriptors:\n      - key: subkey\n        rate_limit: { requests_per_unit: 300, unit: second }\n';
    const request: Entries = [
      ['key', 'value'],
      ['subkey', 'subvalue'],
    ];
    await serving({ 'config.yaml': flat }, async (s) =>
      assert.equal(limitOf(await s.ask('example4', request)), undefined),
    );
    await serving({ 'config.yaml': nested }, async (s) =>
      assert.deepEqual(limitOf(await s.ask('example4', request)), { requestsPerUnit: 300, unit: 'SECOND' }),
    );
  });

  it('Example 5: unlimited answers OK with limit_remaining 4294967295', async () => {
    const yaml = `
domain: internal
descriptors:
  - key: ldap
    rate_limit: { unlimited: true }
  - key: azure
    rate_limit: { unit: minute, requests_per_unit: 100 }
`;
    await serving({ 'config.yaml': yaml }, async (s) => {
      const ldap = await s.ask('internal', [['ldap', 'x']]);
      assert.deepEqual(ldap.statuses, [{ code: 'OK', limitRemaining: 4294967295 }]);
      assert.deepEqual(await s.codes(101, 'internal', [['azure', 'x']]), upTo(100));
    });
  });

  it('Example 6: shadow_mode counts but answers OK', async () => {
    const yaml = `
domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit: { requests_per_unit: 10, unit: second }
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit: { requests_per_unit: 20, unit: second }
`;
    await serving({ 'config.yaml': yaml }, async (s) => {
      const userA: Entries = [
        ['service', 'auth-service'],
        ['user', 'user-a'],
      ];
      assert.deepEqual(await s.codes(12, 'example6', userA), Array<string>(12).fill('OK'));
      assert.deepEqual(
        await s.codes(21, 'example6', [
          ['service', 'auth-service'],
          ['user', 'user-b'],
        ]),
        upTo(20),
      );
      assert.ok((await s.ruleNames()).includes('service.user_user-a OK'));
    });
  });

  it('Example 7: replaces drops the named limit and leaves its count alone', async () => {
    const yaml = `
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit: { name: specific_limit, requests_per_unit: 5, unit: second }
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
`;
    await serving({ 'config.yaml': yaml }, async (s) => {
      const one: Entries = [
        ['key_1', 'value_1'],
        ['user', 'bkthomps'],
      ];
      const two: Entries = [
        ['key_2', 'value_2'],
        ['user', 'bkthomps'],
      ];
      assert.deepEqual(await s.codes(11, 'example7', one, two), upTo(10));
      assert.equal((await s.ask('example7', one)).statuses[0]?.limitRemaining, 4);
    });
  });

  it('Example 8: detailed_metric names each value in the metrics', async () => {
    const yaml = `
domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: key1
    value: value1
    rate_limit: { unit: minute, requests_per_unit: 20 }
`;
    await serving({ 'config.yaml': yaml }, async (s) => {
      assert.deepEqual(await s.codes(11, 'example8', [['key1', 'unspecified_value']]), upTo(10));
      assert.equal((await s.ask('example8', [['key1', 'unspecified_value2']])).statuses[0]?.limitRemaining, 9);
      assert.equal((await s.ask('example8', [['key1', 'value1']])).statuses[0]?.limitRemaining, 19);
      assert.deepEqual((await s.ruleNames()).sort(), [
        'key1_unspecified_value OK',
        'key1_unspecified_value OVER_LIMIT',
        'key1_unspecified_value2 OK',
        'key1_value1 OK',
      ]);
    });
  });

  it('Example 9: a * anywhere in a value, any number of times, each matching any text', async () => {
    const trailing =
      'domain: example9\ndescriptors:\n  - key: key1\n    value: value*\n    rate_limit: { unit: minute, requests_per_unit: 20 }\n';
    const middle =
      'domain: example9\ndescriptors:\n  - key: path\n    value: /api/*/action\n    rate_limit: { unit: minute, requests_per_unit: 20 }\n';
    const multiple =
      'domain: example9\ndescriptors:\n  - key: route\n    value: /api/*/resource/*/action\n    rate_limit: { unit: minute, requests_per_unit: 20 }\n';
    await serving({ 'trailing.yaml': trailing, 'middle.yaml': middle, 'multiple.yaml': multiple }, async (s) => {
      assert.deepEqual(await s.codes(21, 'example9', [['key1', 'valueXYZ']]), upTo(20));
      assert.equal((await s.ask('example9', [['key1', 'value1']])).overallCode, 'OK');
      assert.deepEqual(await s.codes(21, 'example9', [['path', '/api/123/action']]), upTo(20));
      assert.equal((await s.ask('example9', [['path', '/api/user-id/action']])).statuses[0]?.limitRemaining, 19);
      assert.equal(limitOf(await s.ask('example9', [['path', '/api/123/other']])), undefined);
      assert.deepEqual(await s.codes(21, 'example9', [['route', '/api/v1/resource/123/action']]), upTo(20));
      assert.equal((await s.ask('example9', [['route', '/api/v2/resource/456/action']])).overallCode, 'OK');
      assert.equal(limitOf(await s.ask('example9', [['route', '/api/v1/resource/123']])), undefined);
    });
  });

  it('Example 10: value_to_metric puts the request values in the metric names', async () => {
    const yaml = `
domain: example10
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: { unit: minute, requests_per_unit: 60 }
---
domain: example10_wildcard
descriptors:
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit: { unit: minute, requests_per_unit: 100 }
`;
    await serving({ 'config.yaml': yaml }, async (s) => {
      await s.ask('example10', [
        ['route', 'api'],
        ['http_method', 'GET'],
        ['subject_id', '123'],
      ]);
      await s.ask('example10', [
        ['route', 'web'],
        ['http_method', 'POST'],
        ['subject_id', '456'],
      ]);
      await s.ask('example10_wildcard', [
        ['user', 'alice'],
        ['action', 'readfile'],
        ['resource', 'documents'],
      ]);
      assert.deepEqual((await s.ruleNames()).sort(), [
        'route_api.http_method_GET.subject_id OK',
        'route_web.http_method_POST.subject_id OK',
        'user_alice.action_readfile.resource OK',
      ]);
      assert.deepEqual(
        await s.codes(60, 'example10', [
          ['route', 'api'],
          ['http_method', 'GET'],
          ['subject_id', '123'],
        ]),
        [...Array<string>(59).fill('OK'), 'OVER_LIMIT'],
      );
    });
  });

  it('Example 11: share_threshold makes every match of a wildcard share one count', async () => {
    const yaml = `
domain: example11
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: { unit: hour, requests_per_unit: 10 }
  - key: files_no_share
    value: files_no_share/*
    share_threshold: false
    rate_limit: { unit: hour, requests_per_unit: 10 }
---
domain: example11_metrics
descriptors:
  - key: route
    value: api/*
    share_threshold: true
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: { unit: minute, requests_per_unit: 60 }
`;
    await serving({ 'config.yaml': yaml }, async (s) => {
      await s.codes(5, 'example11', [['files', 'files/a.pdf']]);
      await s.codes(5, 'example11', [['files', 'files/b.csv']]);
      assert.equal((await s.ask('example11', [['files', 'files/c.txt']])).overallCode, 'OVER_LIMIT');
      assert.deepEqual(await s.codes(11, 'example11', [['files_no_share', 'files_no_share/a.pdf']]), upTo(10));
      assert.equal((await s.ask('example11', [['files_no_share', 'files_no_share/b.csv']])).overallCode, 'OK');
      await s.ask('example11_metrics', [
        ['route', 'api/v1'],
        ['method', 'GET'],
      ]);
      assert.ok((await s.ruleNames()).includes('route_api/*.method OK'));
    });
  });
});

describe("envoyproxy/ratelimit's test/config", () => {
  it('basic_config.yaml: every rule of it, and where nothing matches', async () => {
    const yaml = `
domain: test-domain
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit: { unit: second, requests_per_unit: 5 }
      - key: subkey1
        value: subvalue1
        rate_limit: { unit: second, requests_per_unit: 10 }
  - key: key2
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: key2
    value: value2
    rate_limit: { unit: minute, requests_per_unit: 30 }
  - key: key2
    value: value3
  - key: key3
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: key4
    rate_limit: { name: key4_rate_limit, unit: day, requests_per_unit: 1 }
  - key: key5
    value: value5
    rate_limit: { unit: day, requests_per_unit: 15 }
    descriptors:
      - key: subkey5
        value: subvalue5
        rate_limit: { unit: day, requests_per_unit: 25 }
  - key: key6
    rate_limit: { unlimited: true }
  - key: key7
    detailed_metric: true
    rate_limit: { unit: minute, requests_per_unit: 70 }
`;
    await serving({ 'basic_config.yaml': yaml }, async (s) => {
      const expect = async (entries: Entries, limit: object | undefined) =>
        assert.deepEqual(limitOf(await s.ask('test-domain', entries)), limit, JSON.stringify(entries));
      await expect([['key1', 'something']], undefined);
      await expect([['key1', 'value1']], undefined);
      await expect(
        [
          ['key2', 'value2'],
          ['subkey', 'subvalue'],
        ],
        undefined,
      );
      await expect(
        [
          ['key5', 'value5'],
          ['subkey5', 'subvalue'],
        ],
        undefined,
      );
      await expect(
        [
          ['key1', 'value1'],
          ['subkey1', 'something'],
        ],
        { requestsPerUnit: 5, unit: 'SECOND' },
      );
      await expect(
        [
          ['key1', 'value1'],
          ['subkey1', 'subvalue1'],
        ],
        { requestsPerUnit: 10, unit: 'SECOND' },
      );
      await expect([['key2', 'something']], { requestsPerUnit: 20, unit: 'MINUTE' });
      await expect([['key2', 'value2']], { requestsPerUnit: 30, unit: 'MINUTE' });
      await expect([['key2', 'value3']], undefined);
      await expect([['key3', 'foo']], { requestsPerUnit: 1, unit: 'HOUR' });
      await expect([['key4', 'foo']], { requestsPerUnit: 1, unit: 'DAY', name: 'key4_rate_limit' });
      await expect([['key5', 'value5']], { requestsPerUnit: 15, unit: 'DAY' });
      await expect(
        [
          ['key5', 'value5'],
          ['subkey5', 'subvalue5'],
        ],
        { requestsPerUnit: 25, unit: 'DAY' },
      );
      assert.equal((await s.ask('test-domain', [['key6', 'foo']])).statuses[0]?.limitRemaining, 4294967295);
      assert.deepEqual(
        await s.codes(6, 'test-domain', [
          ['key1', 'value1'],
          ['subkey1', 'other'],
        ]),
        upTo(5),
      );
      await s.ask('test-domain', [['key7', 'unspecified_value']]);
      assert.ok((await s.ruleNames()).includes('key7_unspecified_value OK'));
    });
  });

  it('bad_limit_unit.yaml, bad_yaml.yaml, empty_domain.yaml, empty_key.yaml: refused', async () => {
    await refused(
      {
        'bad_limit_unit.yaml':
          'domain: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n    rate_limit:\n      unit: foo\n      requests_per_unit: 5\n',
      },
      'bad_limit_unit.yaml',
      'descriptors[0].rate_limit.unit',
      /must be second, minute, hour, day, week, month or year.*got "foo"/,
    );
    await refused({ 'bad_yaml.yaml': "'''\n" }, 'bad_yaml.yaml', 'line 2, column 1', /bad YAML/);
    await refused(
      { 'empty_domain.yaml': 'descriptors:\n' },
      'empty_domain.yaml',
      'domain',
      /must be a non-empty string/,
    );
    await refused(
      { 'empty_key.yaml': 'domain: test-domain\ndescriptors:\n  - value: value1\n' },
      'empty_key.yaml',
      'descriptors[0].key',
      /must be a non-empty string/,
    );
  });

  it('duplicate_key.yaml: refused; duplicate_domain.yaml and merge_domain_key*.yaml: files of one domain merged', async () => {
    await refused(
      {
        'duplicate_key.yaml':
          'domain: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n  - key: key1\n    value: value1\n',
      },
      'duplicate_key.yaml',
      'descriptors[1]',
      /duplicate descriptor: key "key1" with value "value1" is already defined/,
    );
    const merged = {
      'merge_domain_key1.yaml':
        'domain: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n    rate_limit: { unit: minute, requests_per_unit: 10 }\n',
      'merge_domain_key2.yaml':
        'domain: test-domain\ndescriptors:\n  - key: key2\n    value: value2\n    rate_limit: { unit: minute, requests_per_unit: 20 }\n',
      'duplicate_domain.yaml': 'domain: test-domain\ndescriptors:\n',
    };
    await serving(merged, async (s) => {
      assert.deepEqual(limitOf(await s.ask('test-domain', [['key1', 'value1']])), {
        requestsPerUnit: 10,
        unit: 'MINUTE',
      });
      assert.deepEqual(limitOf(await s.ask('test-domain', [['key2', 'value2']])), {
        requestsPerUnit: 20,
        unit: 'MINUTE',
      });
    });
  });

  it('metadata.yaml: each admitting rule’s metadata, merged, in dynamic_metadata; refused where no response carries it', async () => {
    const yaml = `
domain: test-domain
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit: { unit: second, requests_per_unit: 5 }
        metadata:
          name: service_1
      - key: subkey1
        value: subvalue1
        rate_limit: { unit: second, requests_per_unit: 10 }
  - key: key2
    rate_limit: { unit: minute, requests_per_unit: 20 }
    metadata:
      service_with_quota:
        name: service_2
`;
    await serving(
      { 'metadata.yaml': yaml },
      async (s) => {
        const body = {
          domain: 'test-domain',
          hitsAddend: 2,
          descriptors: [
            {
              entries: [
                { key: 'key1', value: 'value1' },
                { key: 'subkey1', value: 'x' },
              ],
            },
            { entries: [{ key: 'key2', value: 'y' }], hitsAddend: 1 },
          ],
        };
        assert.deepEqual((await s.json(body)).dynamicMetadata, {
          domain: 'test-domain',
          descriptors: [{ entries: ['key1=value1', 'subkey1=x'] }, { entries: ['key2=y'], hitsAddend: 1 }],
          hitsAddend: 2,
          metadata: { name: 'service_1', service_with_quota: { name: 'service_2' } },
        });
        // Over gRPC, a google.protobuf.Struct; a descriptor over its limit adds none of its metadata.
        await s.codes(3, 'test-domain', [
          ['key1', 'value1'],
          ['subkey1', 'x'],
        ]);
        const wire = (await s.ask(
          'test-domain',
          [
            ['key1', 'value1'],
            ['subkey1', 'x'],
          ],
          [['key2', 'y']],
        )) as WireResponse & {
          dynamicMetadata?: { fields: Record<string, { structValue?: { fields: Record<string, unknown> } }> };
        };
        assert.equal(wire.overallCode, 'OVER_LIMIT');
        assert.deepEqual(Object.keys(wire.dynamicMetadata?.fields.metadata?.structValue?.fields ?? {}), [
          'service_with_quota',
        ]);
      },
      { responseDynamicMetadata: true },
    );
    await refused(
      { 'metadata.yaml': yaml },
      'metadata.yaml',
      'descriptors[0].descriptors[0].metadata',
      /--response-dynamic-metadata/,
    );
  });

  it('misspelled_key.yaml, misspelled_key2.yaml, non_map_list.yaml, non_string_key.yaml: refused', async () => {
    await refused(
      {
        'misspelled_key.yaml':
          'domain: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n    ratelimit:\n      unit: day\n      requests_per_unit: 5\n',
      },
      'misspelled_key.yaml',
      'descriptors[0].ratelimit',
      /unknown field "ratelimit"/,
    );
    await refused(
      {
        'misspelled_key2.yaml':
          'domain: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n    rate_limit:\n      unit: day\n      requestsperunit: 5\n',
      },
      'misspelled_key2.yaml',
      'descriptors[0].rate_limit.requestsperunit',
      /unknown field "requestsperunit"/,
    );
    await refused(
      { 'non_map_list.yaml': 'domain: test-domain\ndescriptors:\n  - a\n  - b\n  - c\n' },
      'non_map_list.yaml',
      'descriptors[0]',
      /must be a map/,
    );
    await refused(
      {
        'non_string_key.yaml':
          '0.25: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n    rate_limit:\n      unit: day\n      requests_per_unit: 5\n',
      },
      'non_string_key.yaml',
      '0.25',
      /unknown field "0.25"/,
    );
  });

  it('replaces_empty.yaml, replaces_self.yaml, unlimited_with_unit.yaml: refused', async () => {
    const subkey = (rateLimit: string) =>
      `domain: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n    descriptors:\n      - key: subkey1\n        rate_limit:\n${rateLimit}`;
    await refused(
      {
        'replaces_empty.yaml': subkey(
          '          name: self\n          replaces:\n            - name:\n          unit: second\n          requests_per_unit: 5\n',
        ),
      },
      'replaces_empty.yaml',
      'descriptors[0].descriptors[0].rate_limit.replaces[0].name',
      /must be a non-empty string/,
    );
    await refused(
      {
        'replaces_self.yaml': subkey(
          '          name: self\n          replaces:\n            - name: self\n          unit: second\n          requests_per_unit: 5\n',
        ),
      },
      'replaces_self.yaml',
      'descriptors[0].descriptors[0].rate_limit.replaces',
      /cannot replace itself/,
    );
    await refused(
      {
        'unlimited_with_unit.yaml':
          'domain: test-domain\ndescriptors:\n  - key: foo\n    rate_limit:\n      unlimited: true\n      unit: day\n      requests_per_unit: 25\n',
      },
      'unlimited_with_unit.yaml',
      'descriptors[0].rate_limit.unit',
      /"unlimited: true" takes no unit/,
    );
  });

  it('shadowmode_config.yaml: shadow rules never deny, the others do', async () => {
    const yaml = `
domain: test-domain
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit: { unit: second, requests_per_unit: 5 }
      - key: subkey1
        value: subvalue1
        rate_limit: { unit: second, requests_per_unit: 10 }
        shadow_mode: true
  - key: key2
    rate_limit: { unit: minute, requests_per_unit: 20 }
    shadow_mode: true
  - key: key2
    value: value2
    rate_limit: { unit: minute, requests_per_unit: 30 }
`;
    await serving({ 'shadowmode_config.yaml': yaml }, async (s) => {
      assert.deepEqual(
        await s.codes(11, 'test-domain', [
          ['key1', 'value1'],
          ['subkey1', 'subvalue1'],
        ]),
        Array<string>(11).fill('OK'),
      );
      assert.deepEqual(await s.codes(21, 'test-domain', [['key2', 'any']]), Array<string>(21).fill('OK'));
      assert.deepEqual(await s.codes(31, 'test-domain', [['key2', 'value2']]), upTo(30));
      assert.deepEqual(
        await s.codes(6, 'test-domain', [
          ['key1', 'value1'],
          ['subkey1', 'other'],
        ]),
        upTo(5),
      );
    });
  });

  it('share_threshold.yaml: trailing, middle and several wildcards shared, nested and beside exact values', async () => {
    const yaml = `
domain: test-domain
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: nested
    value: parent
    descriptors:
      - key: files
        value: nested/*
        share_threshold: true
        rate_limit: { unit: minute, requests_per_unit: 200 }
  - key: files
    value: top/*
    share_threshold: true
    descriptors:
      - key: files
        value: nested/*
        share_threshold: true
        rate_limit: { unit: minute, requests_per_unit: 300 }
  - key: route
    value: api/*
    share_threshold: true
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: { unit: minute, requests_per_unit: 60 }
  - key: service
    value: svc/*
    share_threshold: true
    descriptors:
      - key: endpoint
        detailed_metric: true
        rate_limit: { unit: minute, requests_per_unit: 80 }
  - key: path
    value: path/*
    share_threshold: true
    descriptors:
      - key: file
        value: file/*
        share_threshold: false
        descriptors:
          - key: type
            rate_limit: { unit: minute, requests_per_unit: 120 }
  - key: user
    value: user/*
    share_threshold: true
    descriptors:
      - key: resource
        value: res/*
        share_threshold: true
        descriptors:
          - key: action
            rate_limit: { unit: minute, requests_per_unit: 150 }
  - key: file
    value: test1
    rate_limit: { unit: minute, requests_per_unit: 50 }
  - key: file
    value: test*
    share_threshold: true
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: midpath
    value: /api*v1
    share_threshold: true
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: multiroute
    value: svc*ep*rpc
    share_threshold: true
    rate_limit: { unit: minute, requests_per_unit: 50 }
  - key: midroute
    value: /api*v2
    share_threshold: true
    value_to_metric: true
    rate_limit: { unit: minute, requests_per_unit: 80 }
  - key: tenant
    value: t*prod
    share_threshold: true
    descriptors:
      - key: resource
        value: res*v2
        share_threshold: true
        rate_limit: { unit: minute, requests_per_unit: 60 }
`;
    await serving({ 'share_threshold.yaml': yaml }, async (s) => {
      const remaining = async (...entries: Entries) =>
        (await s.ask('test-domain', entries)).statuses[0]?.limitRemaining ?? 0;
      // One count for every match, at every depth, and a matching value's own count beside an exact one.
      assert.deepEqual([await remaining(['files', 'files/a']), await remaining(['files', 'files/b'])], [99, 98]);
      assert.deepEqual(
        [
          await remaining(['nested', 'parent'], ['files', 'nested/1']),
          await remaining(['nested', 'parent'], ['files', 'nested/2']),
        ],
        [199, 198],
      );
      assert.deepEqual(
        [
          await remaining(['files', 'top/1'], ['files', 'nested/1']),
          await remaining(['files', 'top/2'], ['files', 'nested/2']),
        ],
        [299, 298],
      );
      assert.deepEqual(
        [
          await remaining(['route', 'api/v1'], ['method', 'GET']),
          await remaining(['route', 'api/v2'], ['method', 'GET']),
        ],
        [59, 58],
      );
      assert.equal(await remaining(['route', 'api/v2'], ['method', 'POST']), 59);
      assert.deepEqual(
        [
          await remaining(['service', 'svc/user'], ['endpoint', 'get']),
          await remaining(['service', 'svc/order'], ['endpoint', 'get']),
        ],
        [79, 78],
      );
      // file/* does not share: each file value its own 120.
      assert.deepEqual(
        [
          await remaining(['path', 'path/a'], ['file', 'file/doc1'], ['type', 'pdf']),
          await remaining(['path', 'path/b'], ['file', 'file/doc2'], ['type', 'pdf']),
        ],
        [119, 119],
      );
      assert.deepEqual(
        [
          await remaining(['user', 'user/alice'], ['resource', 'res/f1'], ['action', 'read']),
          await remaining(['user', 'user/bob'], ['resource', 'res/f2'], ['action', 'read']),
        ],
        [149, 148],
      );
      assert.deepEqual(
        [await remaining(['file', 'test1']), await remaining(['file', 'test2']), await remaining(['file', 'test123'])],
        [49, 99, 98],
      );
      assert.deepEqual([await remaining(['midpath', '/api/v1']), await remaining(['midpath', '/apiXv1'])], [99, 98]);
      assert.equal(limitOf(await s.ask('test-domain', [['midpath', '/api/v2']])), undefined);
      assert.deepEqual(
        [await remaining(['multiroute', 'svcAepBrpc']), await remaining(['multiroute', 'svc-ep-rpc'])],
        [49, 48],
      );
      assert.equal(limitOf(await s.ask('test-domain', [['multiroute', 'svcABCrpc']])), undefined);
      assert.deepEqual(
        [await remaining(['midroute', '/api/v2']), await remaining(['midroute', '/api-beta-v2'])],
        [79, 78],
      );
      assert.deepEqual(
        [
          await remaining(['tenant', 't1prod'], ['resource', 'resAv2']),
          await remaining(['tenant', 't99prod'], ['resource', 'resBBBv2']),
        ],
        [59, 58],
      );
      const names = await s.ruleNames();
      for (const name of [
        'files_files/* OK',
        'nested_parent.files_nested/* OK',
        'files_top/*.files_nested/* OK',
        'route_api/*.method OK',
        'service_svc/*.endpoint_get OK',
        'path_path/*.file_file/*.type OK',
        'user_user/*.resource_res/*.action OK',
        'file_test1 OK',
        'file_test* OK',
        'midpath_/api*v1 OK',
        'multiroute_svc*ep*rpc OK',
        'midroute_/api*v2 OK',
        'tenant_t*prod.resource_res*v2 OK',
      ])
        assert.ok(names.includes(name), `${name} in ${names.join(', ')}`);
    });
  });

  it('wildcard.yaml: a * at the end, in the middle and several times, each enforced', async () => {
    const yaml = `
domain: test-domain
descriptors:
  - key: wild
    value: foo*
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: noWild
    value: foo
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: noVal
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: midWild
    value: bar*b
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: multiWild
    value: foo*bar*baz
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: nestedWild
    value: val1
    descriptors:
      - key: wild
        value: goo*
        rate_limit: { unit: minute, requests_per_unit: 20 }
`;
    await serving({ 'wildcard.yaml': yaml }, async (s) => {
      const limited = async (...entries: Entries) => limitOf(await s.ask('test-domain', entries)) !== undefined;
      assert.deepEqual(await s.codes(21, 'test-domain', [['midWild', 'bar123b']]), upTo(20));
      assert.deepEqual(await s.codes(11, 'test-domain', [['multiWild', 'foo123bar456baz']]), upTo(10));
      assert.deepEqual(await s.codes(21, 'test-domain', [['wild', 'foo1']]), upTo(20));
      // Each value has its own count without share_threshold.
      assert.equal((await s.ask('test-domain', [['wild', 'foo2']])).statuses[0]?.limitRemaining, 19);
      for (const [entries, expected] of [
        [[['midWild', 'barab']], true],
        [[['midWild', 'barb']], true],
        [[['midWild', 'bara']], false],
        [[['midWild', 'xbarb']], false],
        [[['multiWild', 'foobarbaz']], true],
        [[['multiWild', 'foobaz']], false],
        [[['wild', 'bar']], false],
        [[['noWild', 'foo1']], false],
        [[['noVal', 'foo1']], true],
        [
          [
            ['nestedWild', 'val1'],
            ['wild', 'goo2'],
          ],
          true,
        ],
      ] as [Entries, boolean][])
        assert.equal(await limited(...entries), expected, JSON.stringify(entries));
      const names = await s.ruleNames();
      for (const name of [
        'wild_foo* OK',
        'midWild_bar*b OVER_LIMIT',
        'multiWild_foo*bar*baz OK',
        'nestedWild_val1.wild_goo* OK',
      ])
        assert.ok(names.includes(name), `${name} in ${names.join(', ')}`);
    });
  });
});

// Where a copy of envoyproxy/ratelimit is at hand (SLUICE_PEER_REPO, a git directory), its own
// files are loaded as they are: each must load or be refused as its case above says, and a file
// with no case here fails, so that a new one is not missed.
const PEER_REPO = process.env.SLUICE_PEER_REPO ?? '/work/.mirror/envoyproxy+ratelimit/repo';
const PEER_VERDICTS: Record<string, 'loads' | 'refused'> = {
  'bad_limit_unit.yaml': 'refused',
  'bad_yaml.yaml': 'refused',
  'basic_config.yaml': 'loads',
  'duplicate_domain.yaml': 'loads',
  'duplicate_key.yaml': 'refused',
  'empty_domain.yaml': 'refused',
  'empty_key.yaml': 'refused',
  'merge_domain_key1.yaml': 'loads',
  'merge_domain_key2.yaml': 'loads',
  'metadata.yaml': 'loads',
  'misspelled_key.yaml': 'refused',
  'misspelled_key2.yaml': 'refused',
  'non_map_list.yaml': 'refused',
  'non_string_key.yaml': 'refused',
  'replaces_empty.yaml': 'refused',
  'replaces_self.yaml': 'refused',
  'shadowmode_config.yaml': 'loads',
  'share_threshold.yaml': 'loads',
  'unlimited_with_unit.yaml': 'refused',
  'wildcard.yaml': 'loads',
};

describe("envoyproxy/ratelimit's test/config files themselves", () => {
  const git = (...args: string[]) => execFileSync('git', ['--git-dir', PEER_REPO, ...args], { encoding: 'utf8' });
  const present = existsSync(PEER_REPO);
  it(
    'each loads or is refused as its case says, and none is without a case',
    { skip: !present && `no ${PEER_REPO}` },
    () => {
      const names = git('ls-tree', '--name-only', 'HEAD', 'test/config/')
        .split('\n')
        .filter((path) => path.endsWith('.yaml'))
        .map((path) => path.slice('test/config/'.length));
      assert.deepEqual(names.sort(), Object.keys(PEER_VERDICTS).sort());
      for (const name of names) {
        const text = git('show', `HEAD:test/config/${name}`);
        let verdict: string;
        try {
          parseConfig([{ file: name, text }], { responseDynamicMetadata: true });
          verdict = 'loads';
        } catch (error) {
          assert.ok(error instanceof InvalidConfigError, `${name}: ${String(error)}`);
          verdict = 'refused';
        }
        assert.equal(verdict, PEER_VERDICTS[name], name);
      }
    },
  );

  it("every YAML block of its README's Examples 1 to 11 loads", { skip: !present && `no ${PEER_REPO}` }, () => {
    const readme = git('show', 'HEAD:README.md');
    const examples = readme.slice(readme.indexOf('#### Example 1'), readme.indexOf('## Loading Configuration'));
    const blocks = [...examples.matchAll(/```yaml\n([\s\S]*?)```/g)].map(([, text]) => text as string);
    assert.ok(blocks.length >= 15, `${blocks.length} blocks`);
    blocks.forEach((text, i) => parseConfig([{ file: `example-block-${i}.yaml`, text }]));
  });
});
