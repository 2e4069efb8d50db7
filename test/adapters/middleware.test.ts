import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { startRedisServer } from '../../src/cli/redis-server.js';
import type { RateLimitOptions } from '../../src/adapters/middleware-options.js';
import Fastify from 'fastify';
import { rateLimit as fastifyRateLimit, type FastifyRateLimitHook } from '../../src/adapters/fastify.js';
import { storeUnavailableProblem } from '../../src/http/problem.js';
import {
  createLimiter,
  fixedWindow,
  InvalidOptionError,
  memoryStore,
  redisStore,
  slidingLog,
  StoreError,
  tokenBucket,
  type Limiter,
} from '../../src/index.js';
import { uniquePrefix, useRedis } from '../support/redis.js';
import { adapters, cut, get, leave, type AppSpec, type InfoBody, type RunningApp } from './apps.js';

// A window edge: the fake clock starts 10 s into a minute, so a 1-minute window resets in 50 s.
const MINUTE_EDGE = 1_800_000_000_000;
const START = MINUTE_EDGE + 10_000;

// draft-8's partition key of the clients these tests send from: the first 12 bytes of SHA-256("127.0.0.1").
const PK_127_0_0_1 = ':EsoXtJryKJQ28wPg:';

/** The `violated-policies` member of a denial's problem+json body. */
const violatedIn = (body: string): unknown => (JSON.parse(body) as Record<string, unknown>)['violated-policies'];

/** A memory store on a clock the test moves by hand. */
function fakeClock() {
  const clock = { now: START };
  const store = memoryStore({ now: () => clock.now });
  // Limiters sharing a store need their own prefixes, or they count the same keys.
  const limiter = (limit: number, name = 'fixed-window'): Limiter =>
    createLimiter({ store, prefix: name, policy: fixedWindow({ limit, window: '1m', name }) });
  return { clock, limiter };
}

/**
 * `limiter` with the corrections made after a response recorded (refunds; a reservation's settle
 * and cancel), and a way to wait until some number of them have settled.
 */
function watchCorrections(limiter: Limiter) {
  const calls: string[] = [];
  let settled = () => undefined as void;
  const record = <T>(made: Promise<T>, describe: (result: T) => string): Promise<T> =>
    made.then((result) => {
      calls.push(describe(result));
      settled();
      return result;
    });
  const watched: Limiter = {
    ...limiter,
    refund: (key, cost, options) =>
      record(limiter.refund(key, cost, options), (refunded) => `${key} ${JSON.stringify(cost)} ${refunded}`),
    async reserve(key, options) {
      const reservation = await limiter.reserve(key, options);
      return {
        ...reservation,
        settle: (actual) =>
          record(reservation.settle(actual), (done) => `settle ${key} ${JSON.stringify(actual)} ${done}`),
        cancel: () => record(reservation.cancel(), (done) => `cancel ${key} ${done}`),
      };
    },
  };
  const reach = (count: number) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${calls.length} corrections, not ${count}: ${calls.join('; ')}`)),
        2_000,
      );
      settled = () => {
        if (calls.length < count) return;
        clearTimeout(timer);
        resolve();
      };
      settled();
    });
  return { watched, corrections: { calls, reach } };
}

/** The rate-limit fields of a reply (every header sluice may send), absent ones left out. */
function rateLimitFields(headers: Record<string, unknown>): Record<string, unknown> {
  const names = [
    'ratelimit-policy',
    'ratelimit',
    'ratelimit-limit',
    'ratelimit-remaining',
    'ratelimit-reset',
    'x-ratelimit-limit',
    'x-ratelimit-remaining',
    'x-ratelimit-reset',
    'retry-after',
  ];
  return Object.fromEntries(names.filter((name) => headers[name] !== undefined).map((name) => [name, headers[name]]));
}

interface Warning {
  readonly code: string;
  readonly message: string;
}

/** sluice's process warnings from now to the end of the running test (each is emitted on the tick after its cause). */
function sluiceWarnings(): Warning[] {
  const seen: Warning[] = [];
  const listener = (warning: Error & { code?: string }) => {
    if (warning.code?.startsWith('SLUICE_')) seen.push({ code: warning.code, message: warning.message });
  };
  process.on('warning', listener);
  after(() => void process.off('warning', listener));
  return seen;
}

async function statuses(url: string, count: number, options: Parameters<typeof get>[1] = {}): Promise<number[]> {
  const result: number[] = [];
  for (let i = 0; i < count; i++) result.push((await get(url, options)).status);
  return result;
}

const harness = useRedis();

// A real redis-server, stopped before the tests run: its client fails each command at once
// (no offline queue, no retries), as a production client should be set up.
let deadRedis: Redis | undefined;
before(async () => {
  const server = await startRedisServer();
  deadRedis = new Redis(server.url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, lazyConnect: true });
  await deadRedis.connect();
  deadRedis.on('error', () => undefined);
  await server.stop();
});
after(() => deadRedis?.disconnect());

for (const adapter of adapters) {
  describe(`${adapter.name} middleware`, () => {
    const running: RunningApp[] = [];
    const serve = async (spec: AppSpec) => {
      const app = await adapter.serve(spec);
      running.push(app);
      return app;
    };
    after(() => Promise.all(running.map((app) => app.close())));

    it('refuses a bad option at start with InvalidOptionError, and the process goes on', async () => {
      const { limiter } = fakeClock();
      await assert.rejects(
        async () => serve({ global: { limiter: limiter(1), status: 302 } }),
        (error: unknown) => error instanceof InvalidOptionError && error.option === 'status',
      );
    });

    it('admits up to the limit, then answers 429 with exact draft-11 headers and a problem body', async () => {
      const { limiter } = fakeClock();
      const app = await serve({ global: { limiter: limiter(2, 'per-minute') } });
      const first = await get(`${app.url}/`);
      assert.equal(first.status, 200);
      assert.equal(first.body, 'home');
      assert.deepEqual(rateLimitFields(first.headers), {
        'ratelimit-policy': '"per-minute";q=2;w=60',
        ratelimit: '"per-minute";r=1;t=50',
      });
      assert.equal((await get(`${app.url}/`)).status, 200);
      const denied = await get(`${app.url}/`);
      assert.equal(denied.status, 429);
      assert.deepEqual(rateLimitFields(denied.headers), {
        'ratelimit-policy': '"per-minute";q=2;w=60',
        ratelimit: '"per-minute";r=0;t=50',
        'retry-after': '50',
      });
      assert.equal(denied.headers['content-type'], 'application/problem+json');
      assert.deepEqual(JSON.parse(denied.body), {
        type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
        title: 'Too Many Requests: the quota of this client is exceeded',
        status: 429,
        'violated-policies': ['per-minute'],
      });
    });

    it('draft-11 t is the wait for more quota, not for a full bucket; draft-7 and draft-8 keep the full reset', async () => {
      const { clock } = fakeClock();
      const store = memoryStore({ now: () => clock.now });
      const policy = tokenBucket({ capacity: 10, refillPerSecond: 1, name: 'tb' });
      const app = await serve({ global: { limiter: createLimiter({ store, prefix: 'draft-11', policy }) } });
      const legacy = await serve({
        global: { limiter: createLimiter({ store, prefix: 'draft-7', policy }), headers: 'draft-7' },
      });
      const replies = [];
      for (let i = 0; i < 12; i++) replies.push(await get(`${app.url}/`));
      assert.deepEqual(replies[0] && rateLimitFields(replies[0].headers), {
        'ratelimit-policy': '"tb";q=10;w=10',
        ratelimit: '"tb";r=9;t=1',
      });
      assert.deepEqual(replies[9] && rateLimitFields(replies[9].headers), {
        'ratelimit-policy': '"tb";q=10;w=10',
        ratelimit: '"tb";r=0;t=1',
      });
      assert.deepEqual(replies[11] && rateLimitFields(replies[11].headers), {
        'ratelimit-policy': '"tb";q=10;w=10',
        ratelimit: '"tb";r=0;t=1',
        'retry-after': '1',
      });
      clock.now += 500;
      assert.equal((await get(`${app.url}/`)).headers.ratelimit, '"tb";r=0;t=1');
      clock.now += 500;
      assert.deepEqual(rateLimitFields((await get(`${app.url}/`)).headers), {
        'ratelimit-policy': '"tb";q=10;w=10',
        ratelimit: '"tb";r=0;t=1',
      });
      for (let i = 0; i < 11; i++) await get(`${legacy.url}/`);
      assert.deepEqual(rateLimitFields((await get(`${legacy.url}/`)).headers), {
        'ratelimit-policy': '10;w=10',
        ratelimit: 'limit=10, remaining=0, reset=10',
        'retry-after': '1',
      });
      const draft8 = await serve({
        global: { limiter: createLimiter({ store, prefix: 'draft-8', policy }), headers: 'draft-8' },
      });
      for (let i = 0; i < 11; i++) await get(`${draft8.url}/`);
      assert.deepEqual(rateLimitFields((await get(`${draft8.url}/`)).headers), {
        'ratelimit-policy': `"tb";q=10;w=10;pk=${PK_127_0_0_1}`,
        ratelimit: '"tb";r=0;t=10',
        'retry-after': '1',
      });
    });

    it('names unnamed policies by what they allow, in the headers and the problem body', async () => {
      const clock = { now: START };
      const policy = [slidingLog({ limit: 1, window: '1s' }), slidingLog({ limit: 5, window: '1m' })];
      const app = await serve({
        global: { limiter: createLimiter({ store: memoryStore({ now: () => clock.now }), policy }) },
      });
      assert.equal((await get(`${app.url}/`)).status, 200);
      const denied = await get(`${app.url}/`);
      assert.deepEqual(rateLimitFields(denied.headers), {
        'ratelimit-policy': '"1-per-1s";q=1;w=1, "5-per-1m";q=5;w=60',
        ratelimit: '"1-per-1s";r=0;t=1, "5-per-1m";r=4;t=60',
        'retry-after': '1',
      });
      assert.deepEqual(violatedIn(denied.body), ['1-per-1s']);
    });

    it('admits a client that waits Retry-After seconds, and not one ms sooner', async () => {
      const { clock, limiter } = fakeClock();
      const app = await serve({ global: { limiter: limiter(1) } });
      assert.deepEqual(await statuses(`${app.url}/`, 2), [200, 429]);
      const retryAfter = Number((await get(`${app.url}/`)).headers['retry-after']);
      clock.now += retryAfter * 1000 - 1;
      assert.equal((await get(`${app.url}/`)).status, 429);
      clock.now += 1;
      assert.equal((await get(`${app.url}/`)).status, 200);
    });

    it('counts what cost(req) says a request uses', async () => {
      const { limiter } = fakeClock();
      const app = await serve({ global: { limiter: limiter(5), cost: () => 2 } });
      assert.equal((await get(`${app.url}/`)).headers.ratelimit, '"fixed-window";r=3;t=50');
      assert.deepEqual(await statuses(`${app.url}/`, 2), [200, 429]);
    });

    for (const [option, refunded, counted] of [
      ['skipFailedRequests', '/fail', '/'],
      ['skipSuccessfulRequests', '/', '/fail'],
    ] as const) {
      it(`${option}: gives back what a request to ${refunded} cost once answered, and counts ${counted}`, async () => {
        const { limiter } = fakeClock();
        const { watched, corrections: refunds } = watchCorrections(limiter(2));
        const app = await serve({ global: { limiter: watched, [option]: true, cost: () => 1 } });
        for (let i = 1; i <= 3; i++) {
          assert.equal((await get(`${app.url}${refunded}`)).status, refunded === '/fail' ? 400 : 200);
          await refunds.reach(i);
        }
        assert.deepEqual(
          await statuses(`${app.url}${counted}`, 3),
          counted === '/fail' ? [400, 400, 429] : [200, 200, 429],
        );
        assert.deepEqual(refunds.calls, ['127.0.0.1 1 true', '127.0.0.1 1 true', '127.0.0.1 1 true']);
      });
    }

    it('skipSuccessfulRequests: gives back a HEAD request answered 200, as it does its GET', async () => {
      const { limiter } = fakeClock();
      const { watched, corrections: refunds } = watchCorrections(limiter(2));
      const app = await serve({ global: { limiter: watched, skipSuccessfulRequests: true } });
      for (let i = 1; i <= 3; i++) {
        assert.equal((await get(`${app.url}/`, { method: 'HEAD' })).status, 200);
        await refunds.reach(i);
      }
      assert.deepEqual(await statuses(`${app.url}/fail`, 3), [400, 400, 429]);
    });

    it('skipFailedRequests: gives back a response cut off mid-way, as a failure', async () => {
      const { limiter } = fakeClock();
      const { watched, corrections: refunds } = watchCorrections(limiter(2));
      const app = await serve({ global: { limiter: watched, skipFailedRequests: true } });
      for (let i = 1; i <= 3; i++) {
        assert.equal(await cut(`${app.url}/cut`), 200);
        await refunds.reach(i);
      }
      assert.deepEqual(await statuses(`${app.url}/`, 3), [200, 200, 429]);
    });

    it('skipFailedRequests: gives back a request whose client left while it was being decided, as a failure', async () => {
      const { limiter } = fakeClock();
      const { watched, corrections: refunds } = watchCorrections(limiter(2));
      let entered = () => undefined as void;
      // Holds a request from X-Leave's client until that client has gone.
      const key = async (req: unknown) => {
        if (adapter.header(req, 'x-leave') === undefined) return 'client';
        const { socket } = adapter.incoming(req);
        const gone = new Promise((resolve) => socket.once('close', resolve));
        entered();
        await gone;
        return 'client';
      };
      const app = await serve({ global: { limiter: watched, skipFailedRequests: true, key } });
      for (let i = 1; i <= 3; i++) {
        await leave(`${app.url}/`, new Promise((resolve) => (entered = resolve)));
        await refunds.reach(i);
      }
      assert.deepEqual(await statuses(`${app.url}/`, 3), [200, 200, 429]);
    });

    it('skipSuccessfulRequests: counts a response cut off mid-way, as a failure', async () => {
      const { limiter } = fakeClock();
      const { watched, corrections: refunds } = watchCorrections(limiter(3));
      const app = await serve({ global: { limiter: watched, skipSuccessfulRequests: true } });
      for (let i = 1; i <= 2; i++) {
        assert.equal(await cut(`${app.url}/cut`), 200);
        // A finished request after each cut one: its refund is the only one due.
        assert.equal((await get(`${app.url}/`)).status, 200);
        await refunds.reach(i);
      }
      assert.deepEqual(await statuses(`${app.url}/fail`, 2), [400, 429]);
      assert.equal(refunds.calls.length, 2);
    });

    describe('budgets: a cost by unit, settled when the response is over', () => {
      /** 10 requests and 1000 tokens a minute on the fake clock; each request reserves 500 tokens and settles at its X-Used-Tokens. */
      const budget = (more: Partial<RateLimitOptions<unknown>> = {}) => {
        const { clock } = fakeClock();
        const store = memoryStore({ now: () => clock.now });
        const limiter = createLimiter({
          store,
          policy: [
            fixedWindow({ limit: 10, window: '1m', name: 'requests' }),
            fixedWindow({ limit: 1000, window: '1m', name: 'tokens', counts: 'tokens' }),
          ],
        });
        const { watched, corrections } = watchCorrections(limiter);
        const responses: unknown[] = [];
        const global: RateLimitOptions<unknown> = {
          limiter: watched,
          cost: () => ({ requests: 1, tokens: 500 }),
          settle: (req, res) => {
            responses.push(res);
            return { requests: 1, tokens: Number(adapter.header(req, 'x-used-tokens')) };
          },
          ...more,
        };
        return { limiter, corrections, responses, global };
      };
      const used = (tokens: number) => ({ headers: { 'X-Used-Tokens': String(tokens) } });

      it('reserves the estimate, settles at what the request used, and denies a key in debt', async () => {
        const { limiter, corrections, responses, global } = budget();
        const app = await serve({ global });
        const first = await get(`${app.url}/`, used(100));
        assert.deepEqual(rateLimitFields(first.headers), {
          'ratelimit-policy': '"requests";q=10;w=60, "tokens";q=1000;qu="tokens";w=60',
          ratelimit: '"requests";r=9;t=50, "tokens";r=500;t=50',
        });
        await corrections.reach(1);
        assert.deepEqual(corrections.calls, ['settle 127.0.0.1 {"requests":1,"tokens":100} true']);
        assert.ok(
          typeof responses[0] === 'object' && responses[0] !== null,
          "settle receives the framework's response",
        );
        assert.deepEqual(
          (await limiter.peek('127.0.0.1')).policies.map((p) => p.remaining),
          [9, 900],
        );
        // 500 reserved, 1500 used: 1000 more, 600 past the limit.
        assert.equal((await get(`${app.url}/`, used(1500))).status, 200);
        await corrections.reach(2);
        const inDebt = await get(`${app.url}/`, used(1));
        assert.equal(inDebt.status, 429);
        assert.deepEqual(violatedIn(inDebt.body), ['tokens']);
      });

      it('skipFailedRequests cancels the reservation of a failed or cut-off response instead of settling it', async () => {
        const { limiter, corrections, global } = budget({ skipFailedRequests: true });
        const app = await serve({ global });
        assert.equal((await get(`${app.url}/fail`, used(700))).status, 400);
        assert.equal(await cut(`${app.url}/cut`), 200);
        await corrections.reach(2);
        assert.deepEqual(corrections.calls, ['cancel 127.0.0.1 true', 'cancel 127.0.0.1 true']);
        assert.deepEqual(
          (await limiter.peek('127.0.0.1')).policies.map((p) => p.remaining),
          [10, 1000],
        );
      });

      it('reports a settle hook that throws or answers a bad cost once, and the request stays charged at its estimate', async () => {
        const warnings = sluiceWarnings();
        const { limiter, global } = budget({
          settle: (req) => {
            if (adapter.header(req, 'x-used-tokens') === 'throw') throw new Error('no usage reported');
            return { tokens: -1 };
          },
        });
        const app = await serve({ global });
        assert.equal((await get(`${app.url}/`, { headers: { 'X-Used-Tokens': 'throw' } })).status, 200);
        assert.equal((await get(`${app.url}/`)).status, 200);
        for (let wait = 0; warnings.length === 0 && wait < 100; wait++)
          await new Promise((resolve) => setTimeout(resolve, 10));
        assert.deepEqual(
          warnings.map((w) => w.code),
          ['SLUICE_SETTLE_FAILED'],
        );
        assert.match(warnings[0]?.message ?? '', /no usage reported/);
        assert.deepEqual(
          (await limiter.peek('127.0.0.1')).policies.map((p) => p.remaining),
          [8, 0],
        );
      });

      it('refuses a settle hook beside a limiter without reserve()', async () => {
        const { limiter } = fakeClock();
        const withoutReserve = { ...limiter(1), reserve: undefined } as unknown as Limiter;
        await assert.rejects(
          async () => serve({ global: { limiter: withoutReserve, settle: () => 1 } }),
          (error: unknown) => error instanceof InvalidOptionError && error.option === 'limiter',
        );
      });
    });

    it('keys clients by socket address and ignores a forged X-Forwarded-For, reporting it once', async () => {
      const { limiter } = fakeClock();
      const warnings = sluiceWarnings();
      const app = await serve({ global: { limiter: limiter(1) } });
      assert.equal((await get(`${app.url}/`, { from: '127.0.0.2' })).status, 200);
      for (const forged of ['198.51.100.1', '198.51.100.2', '2001:db8::1']) {
        assert.equal(
          (await get(`${app.url}/`, { from: '127.0.0.2', headers: { 'X-Forwarded-For': forged } })).status,
          429,
        );
      }
      assert.equal((await get(`${app.url}/`, { from: '127.0.0.3' })).status, 200);
      assert.deepEqual(
        warnings.map((warning) => warning.code),
        ['SLUICE_PROXY_HEADER_IGNORED'],
      );
    });

    it('behind one trusted proxy, reads only the hop it appended: forged addresses to its left earn nothing', async () => {
      const { limiter } = fakeClock();
      const warnings = sluiceWarnings();
      const app = await serve({
        global: { limiter: limiter(1), trustedProxies: 1 },
      });
      const through = (chain: string) => get(`${app.url}/`, { headers: { 'X-Forwarded-For': chain } });
      assert.equal((await through('203.0.113.9')).status, 200);
      assert.equal((await through('198.51.100.1, 203.0.113.9')).status, 429);
      assert.equal((await through('198.51.100.2,203.0.113.9')).status, 429);
      assert.equal((await through('::ffff:203.0.113.9')).status, 429);
      assert.equal((await through('203.0.113.10')).status, 200);
      assert.deepEqual(warnings, []);
    });

    it(`with trustedProxies 'framework', ${adapter.proxySetting ? "keys clients by the framework's own proxy setting" : 'is refused: the framework has no proxy setting'}`, async () => {
      const { limiter } = fakeClock();
      const warnings = sluiceWarnings();
      const spec: AppSpec = {
        global: { limiter: limiter(1), trustedProxies: 'framework' },
        frameworkProxy: true,
      };
      if (!adapter.proxySetting) {
        await assert.rejects(
          async () => serve(spec),
          (error: unknown) =>
            error instanceof InvalidOptionError &&
            error.option === 'trustedProxies' &&
            error.message.includes('no proxy setting of its own'),
        );
        return;
      }
      const app = await serve(spec);
      const through = async (chain: string) =>
        (await get(`${app.url}/`, { headers: { 'X-Forwarded-For': chain } })).status;
      assert.deepEqual(
        [
          await through('203.0.113.9'),
          await through('198.51.100.1, 203.0.113.9'),
          await through('::ffff:203.0.113.9'),
          await through('203.0.113.10'),
        ],
        [200, 429, 429, 200],
      );
      assert.deepEqual(warnings, []);
      // Without the framework's setting, it sees only the socket: every client is 127.0.0.1.
      const unset = await serve({ global: { limiter: limiter(1, 'unset'), trustedProxies: 'framework' } });
      assert.deepEqual(
        [
          (await get(`${unset.url}/`, { headers: { 'X-Forwarded-For': '203.0.113.9' } })).status,
          (await get(`${unset.url}/`, { headers: { 'X-Forwarded-For': '203.0.113.10' } })).status,
        ],
        [200, 429],
      );
    });

    it('groups IPv6 clients by /56: one client rotating through its addresses shares one quota', async () => {
      const { limiter } = fakeClock();
      const app = await serve({ global: { limiter: limiter(2), trustedProxies: 1 } });
      const from = (address: string) => get(`${app.url}/`, { headers: { 'X-Forwarded-For': address } });
      assert.equal((await from('2001:db8:ab:cd01::1')).status, 200);
      assert.equal((await from('2001:db8:ab:cdff:1234::2')).status, 200);
      assert.equal((await from('2001:db8:ab:cd42::3')).status, 429);
      assert.equal((await from('2001:db8:ab:ce00::1')).status, 200);
    });

    it('keys an IPv4-mapped IPv6 address, however spelled, as its IPv4 address', async () => {
      const { limiter } = fakeClock();
      const app = await serve({ global: { limiter: limiter(1), trustedProxies: 1 } });
      const from = (address: string) => get(`${app.url}/`, { headers: { 'X-Forwarded-For': address } });
      assert.equal((await from('203.0.113.8')).status, 200);
      for (const spelling of [
        '0:0:0:0:0:ffff:203.0.113.8',
        '::ffff:cb00:7108',
        '0000::FFFF:CB00:7108',
        '[::ffff:203.0.113.8]:4711',
      ]) {
        assert.equal((await from(spelling)).status, 429, spelling);
      }
      assert.equal((await from('::1')).status, 200);
    });

    it('exports clientAddress: the default key, for a key function of your own', async () => {
      const { limiter } = fakeClock();
      const keys: string[] = [];
      const key = (req: unknown) => `anonymous:${adapter.clientAddress(req, { trustedProxies: 1 })}`;
      const app = await serve({
        global: { limiter: limiter(1), key, onDenied: (_req, denial) => void keys.push(denial.key) },
      });
      const from = (address: string) => get(`${app.url}/`, { headers: { 'X-Forwarded-For': address } });
      assert.deepEqual(
        [
          await from('2001:db8:ab:cd01::1'),
          await from('2001:db8:ab:cdff::2'),
          await from('203.0.113.8'),
          await from('::ffff:cb00:7108'),
        ].map((r) => r.status),
        [200, 429, 200, 429],
      );
      assert.deepEqual(keys, ['anonymous:2001:db8:ab:cd00::/56', 'anonymous:203.0.113.8']);
      assert.throws(
        () => adapter.clientAddress({}, { trustedProxies: true as unknown as number }),
        (error: unknown) => error instanceof InvalidOptionError && error.option === 'trustedProxies',
      );
    });

    it('reads the Forwarded header when told to, and only it', async () => {
      const { limiter } = fakeClock();
      const app = await serve({ global: { limiter: limiter(1), trustedProxies: 1, proxyHeader: 'forwarded' } });
      const send = (headers: Record<string, string>) => get(`${app.url}/`, { headers });
      assert.equal((await send({ Forwarded: 'for="[2001:db8:cafe::17]:4711";proto=https' })).status, 200);
      assert.equal(
        (await send({ Forwarded: 'for=198.51.100.1, for="[2001:db8:cafe:1::9]"', 'X-Forwarded-For': '203.0.113.1' }))
          .status,
        429,
      );
      assert.equal((await send({ Forwarded: 'for=192.0.2.60' })).status, 200);
    });

    it('parses Forwarded per RFC 7239: commas and semicolons inside quoted strings separate nothing', async () => {
      const { limiter } = fakeClock();
      const app = await serve({ global: { limiter: limiter(1), trustedProxies: 2, proxyHeader: 'forwarded' } });
      const send = (forwarded: string) => get(`${app.url}/`, { headers: { Forwarded: forwarded } });
      assert.equal((await send('for=198.51.100.1;host="a,b;c", for=10.0.0.1')).status, 200);
      assert.equal((await send('for=198.51.100.2;host="a,b", for=10.0.0.1')).status, 200);
      assert.equal((await send('for="198.51.100.1";host="say \\"hi,\\"", for=10.0.0.2')).status, 429);
      // A quote a client leaves open does not swallow what the trusted proxies appended after it.
      assert.equal((await send('for=198.51.100.9, for="x, for=198.51.100.3, for=10.0.0.1')).status, 200);
      assert.equal((await send('for=198.51.100.3, for=10.0.0.1')).status, 429);
    });

    it('skips what skip() names, and limits a route by its own limiter alone', async () => {
      const { limiter } = fakeClock();
      const app = await serve({
        global: { limiter: limiter(1, 'site') },
        login: { limiter: limiter(2, 'login') },
        skipPath: '/health',
      });
      const health = await get(`${app.url}/health`);
      assert.equal(health.body, 'ok');
      assert.deepEqual(rateLimitFields(health.headers), {});
      assert.deepEqual(await statuses(`${app.url}/health`, 3), [200, 200, 200]);
      assert.deepEqual(await statuses(`${app.url}/login`, 3), [200, 200, 429]);
      const denied = await get(`${app.url}/login`);
      assert.equal(denied.headers.ratelimit, '"login";r=0;t=50');
      assert.deepEqual(violatedIn(denied.body), ['login']);
      assert.deepEqual(await statuses(`${app.url}/`, 2), [200, 429]);
    });

    it('sends the fields of each header mode, and only those', async () => {
      const expected: Record<string, Record<string, string>> = {
        'draft-8': {
          'ratelimit-policy': `"fixed-window";q=1;w=60;pk=${PK_127_0_0_1}`,
          ratelimit: '"fixed-window";r=0;t=50',
          'retry-after': '50',
        },
        'draft-7': { 'ratelimit-policy': '1;w=60', ratelimit: 'limit=1, remaining=0, reset=50', 'retry-after': '50' },
        'draft-6': {
          'ratelimit-policy': '1;w=60',
          'ratelimit-limit': '1',
          'ratelimit-remaining': '0',
          'ratelimit-reset': '50',
          'retry-after': '50',
        },
        legacy: {
          'x-ratelimit-limit': '1',
          'x-ratelimit-remaining': '0',
          'x-ratelimit-reset': String((START + 50_000) / 1000),
          'retry-after': '50',
        },
        false: { 'retry-after': '50' },
      };
      for (const mode of ['draft-8', 'draft-7', 'draft-6', 'legacy', false] as const) {
        const { clock, limiter } = fakeClock();
        // The legacy reset is epoch seconds from this server's clock: pin it to the fake one.
        const realNow = Date.now;
        Date.now = () => clock.now;
        try {
          const app = await serve({ global: { limiter: limiter(1), headers: mode } });
          await get(`${app.url}/`);
          assert.deepEqual(rateLimitFields((await get(`${app.url}/`)).headers), expected[String(mode)], String(mode));
        } finally {
          Date.now = realNow;
        }
      }
    });

    it('speaks for one binding policy in Retry-After and every header mode: the longest wait among those that denied', async () => {
      // The example: [2 per 1 s, 5 per 1 h], three calls of cost 2; the third is denied by both.
      const expected: Record<string, Record<string, string>> = {
        'draft-11': {
          'ratelimit-policy': '"per-second";q=2;w=1, "per-hour";q=5;w=3600',
          ratelimit: '"per-second";r=0;t=1, "per-hour";r=1;t=3589',
          'retry-after': '3589',
        },
        'draft-8': {
          'ratelimit-policy': `"per-second";q=2;w=1;pk=${PK_127_0_0_1}, "per-hour";q=5;w=3600;pk=${PK_127_0_0_1}`,
          ratelimit: '"per-second";r=0;t=1, "per-hour";r=1;t=3589',
          'retry-after': '3589',
        },
        'draft-7': {
          'ratelimit-policy': '5;w=3600',
          ratelimit: 'limit=5, remaining=1, reset=3589',
          'retry-after': '3589',
        },
        'draft-6': {
          'ratelimit-policy': '5;w=3600',
          'ratelimit-limit': '5',
          'ratelimit-remaining': '1',
          'ratelimit-reset': '3589',
          'retry-after': '3589',
        },
        legacy: {
          'x-ratelimit-limit': '5',
          'x-ratelimit-remaining': '1',
          'x-ratelimit-reset': String((START + 1_000 + 3_589_000) / 1000),
          'retry-after': '3589',
        },
      };
      for (const mode of ['draft-11', 'draft-8', 'draft-7', 'draft-6', 'legacy'] as const) {
        const clock = { now: START };
        const store = memoryStore({ now: () => clock.now });
        const policy = [
          fixedWindow({ limit: 2, window: '1s', name: 'per-second' }),
          fixedWindow({ limit: 5, window: '1h', name: 'per-hour' }),
        ];
        const realNow = Date.now;
        Date.now = () => clock.now;
        try {
          const app = await serve({
            global: { limiter: createLimiter({ store, policy }), headers: mode, cost: () => 2 },
          });
          assert.equal((await get(`${app.url}/`)).status, 200);
          clock.now += 1_000;
          assert.equal((await get(`${app.url}/`)).status, 200);
          const denied = await get(`${app.url}/`);
          assert.equal(denied.status, 429);
          assert.deepEqual(rateLimitFields(denied.headers), expected[mode], mode);
        } finally {
          Date.now = realNow;
        }
      }
    });

    it('answers 503 with a custom body when asked, and tells onDenied', async () => {
      const { limiter } = fakeClock();
      const denials: string[] = [];
      const options: RateLimitOptions<unknown> = {
        limiter: limiter(1, 'shed'),
        status: 503,
        onDenied: (_req, denial) =>
          void denials.push(
            `${denial.reason} ${denial.status} ${denial.key} ${denial.violated.map((p) => p.name).join()}`,
          ),
        body: (_req, denial) => ({ error: 'busy', retryInMs: denial.retryAfterMs }),
      };
      const app = await serve({ global: options });
      await get(`${app.url}/`, { from: '127.0.0.4' });
      const denied = await get(`${app.url}/`, { from: '127.0.0.4' });
      assert.equal(denied.status, 503);
      assert.equal(denied.headers['retry-after'], '50');
      assert.equal(denied.headers['content-type'], 'application/json; charset=utf-8');
      assert.deepEqual(JSON.parse(denied.body), { error: 'busy', retryInMs: 50_000 });
      assert.deepEqual(denials, ['limited 503 127.0.0.4 shed']);
    });

    it('answers a denial whose body() returns nothing with an empty text body', async () => {
      const { limiter } = fakeClock();
      const app = await serve({ global: { limiter: limiter(1), body: () => undefined } });
      await get(`${app.url}/`);
      const denied = await get(`${app.url}/`);
      assert.equal(denied.status, 429);
      assert.equal(denied.headers['content-type'], 'text/plain; charset=utf-8');
      assert.equal(denied.body, '');
    });

    it("decides each request under the policies policy(req) returns, sharing the key's state", async () => {
      const { limiter } = fakeClock();
      const free = limiter(1, 'free');
      const pro = fixedWindow({ limit: 3, window: '1m', name: 'pro' });
      const app = await serve({
        global: { limiter: free, policy: (req) => (adapter.header(req, 'x-tier') === 'pro' ? pro : free.policies) },
      });
      const as = async (tier: string) => {
        const reply = await get(`${app.url}/`, { headers: { 'X-Tier': tier } });
        return `${reply.status} ${String(reply.headers.ratelimit)}`;
      };
      assert.deepEqual(
        [await as('free'), await as('free'), await as('pro'), await as('pro'), await as('pro')],
        [
          '200 "free";r=0;t=50',
          '429 "free";r=0;t=50',
          '200 "pro";r=1;t=50',
          '200 "pro";r=0;t=50',
          '429 "pro";r=0;t=50',
        ],
      );
    });

    it("shows the handler its request's rate limit, in the framework's own place", async () => {
      const { limiter } = fakeClock();
      const app = await serve({ global: { limiter: limiter(5, 'per-minute') } });
      await get(`${app.url}/`);
      const info = JSON.parse((await get(`${app.url}/info`)).body) as InfoBody;
      assert.deepEqual(info, { key: '127.0.0.1', allowed: true, remaining: 3, policies: ['per-minute'] });
      const skipped = await serve({ global: { limiter: limiter(5, 'skipped') }, skipPath: '/info' });
      assert.equal((await get(`${skipped.url}/info`)).body, 'null');
    });

    it('answers any error status it is given, with a quota-exceeded problem', async () => {
      const { limiter } = fakeClock();
      const app = await serve({ global: { limiter: limiter(1, 'daily'), status: 403 } });
      await get(`${app.url}/`);
      const denied = await get(`${app.url}/`);
      assert.deepEqual(
        [denied.status, denied.headers['retry-after'], denied.headers['content-type']],
        [403, '50', 'application/problem+json'],
      );
      assert.deepEqual(JSON.parse(denied.body), {
        type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
        title: 'Forbidden: the quota of this client is exceeded',
        status: 403,
        'violated-policies': ['daily'],
      });
    });

    it('answers a denial as respond() shapes it: status, headers and body, beside the rate-limit fields', async () => {
      const { limiter } = fakeClock();
      const app = await serve({
        global: {
          limiter: limiter(1, 'pages'),
          respond: (_req, denial) => ({
            status: 403,
            headers: {
              'Content-Type': 'text/html; charset=utf-8',
              'X-Denied-By': denial.violated.map((p) => p.name).join(),
            },
            body: `<p>Back in ${denial.retryAfterMs / 1000} s</p>`,
          }),
        },
      });
      await get(`${app.url}/`);
      const denied = await get(`${app.url}/`);
      assert.deepEqual(
        [
          denied.status,
          denied.headers['content-type'],
          denied.headers['x-denied-by'],
          denied.headers['retry-after'],
          denied.headers.ratelimit,
          denied.body,
        ],
        [403, 'text/html; charset=utf-8', 'pages', '50', '"pages";r=0;t=50', '<p>Back in 50 s</p>'],
      );
      // What respond() returns is checked on the request: a bad status is the app's bug, a 500.
      const bad = await serve({ global: { limiter: limiter(1, 'bad'), respond: () => ({ status: 200 }) } });
      await get(`${bad.url}/`);
      const realError = console.error;
      console.error = () => undefined;
      try {
        assert.equal((await get(`${bad.url}/`)).status, 500);
      } finally {
        console.error = realError;
      }
    });

    it('answers 500 when a callback throws, and goes on serving', async () => {
      const { limiter } = fakeClock();
      let calls = 0;
      const key = () => {
        calls += 1;
        if (calls <= 2) throw new Error('no key for this request');
        return 'client';
      };
      const app = await serve({ global: { limiter: limiter(5), key } });
      // Each framework logs the error through its default handler; keep the test output clean.
      const realError = console.error;
      console.error = () => undefined;
      try {
        assert.deepEqual(await statuses(`${app.url}/`, 3), [500, 500, 200]);
      } finally {
        console.error = realError;
      }
    });

    it('enforces the limit through a real Redis', async () => {
      const limiter = createLimiter({
        store: redisStore(harness.redis),
        prefix: uniquePrefix(),
        policy: fixedWindow({ limit: 3, window: '1h' }),
      });
      const app = await serve({ global: { limiter } });
      assert.deepEqual(await statuses(`${app.url}/`, 5), [200, 200, 200, 429, 429]);
    });

    // The same answer whichever limiter the failure policy is given to: one the middleware builds, or one of createLimiter's.
    for (const [builtBy, onStoreError] of [
      ['middleware', 'allow'],
      ['middleware', 'deny'],
      ['createLimiter', 'allow'],
      ['createLimiter', 'deny'],
    ] as const) {
      it(`when Redis is down and onStoreError is '${onStoreError}' (limiter built by ${builtBy}), claims nothing about the quota and lets the limiter report it once`, async () => {
        const warnings = sluiceWarnings();
        const denials: string[] = [];
        const built = {
          store: redisStore(deadRedis as Redis),
          policy: fixedWindow({ limit: 1, window: '1m', name: 'per-minute' }),
          prefix: uniquePrefix(),
          onStoreError,
        };
        const app = await serve({
          global: {
            ...(builtBy === 'middleware' ? built : { limiter: createLimiter(built) }),
            onDenied: (_req, denial) =>
              void denials.push(
                `${denial.reason} ${denial.status} ${denial.violated.length} ${denial.error instanceof StoreError}`,
              ),
          },
        });
        const replies = [await get(`${app.url}/`), await get(`${app.url}/`)];
        for (const reply of replies) {
          assert.deepEqual(rateLimitFields(reply.headers), {});
          if (onStoreError === 'allow') {
            assert.deepEqual([reply.status, reply.body], [200, 'home']);
          } else {
            assert.equal(reply.status, 503);
            assert.equal(reply.headers['content-type'], 'application/problem+json');
            assert.deepEqual(JSON.parse(reply.body), storeUnavailableProblem);
          }
        }
        assert.deepEqual(denials, onStoreError === 'allow' ? [] : ['store-error 503 0 true', 'store-error 503 0 true']);
        // The limiter's warning, once for the outage, saying what the middleware answered.
        assert.deepEqual(
          warnings.map((warning) => warning.code),
          ['SLUICE_STORE_FAILED'],
        );
        assert.match(warnings[0]?.message ?? '', new RegExp(`answering '${onStoreError}' until it recovers$`));
      });
    }

    it('refuses onStoreError beside a limiter (its own decides), and onWarning, naming process warnings', async () => {
      const { limiter } = fakeClock();
      await assert.rejects(
        async () => serve({ global: { limiter: limiter(1), onStoreError: 'deny' } }),
        (error: unknown) =>
          error instanceof InvalidOptionError &&
          error.option === 'onStoreError' &&
          error.message.includes('its own onStoreError decides'),
      );
      await assert.rejects(
        async () => serve({ global: { limiter: limiter(1), onWarning: () => undefined } as never }),
        (error: unknown) =>
          error instanceof InvalidOptionError &&
          error.option === 'onWarning' &&
          error.message.includes("process.on('warning'"),
      );
    });
  });
}

describe('fastify hook option', () => {
  // Keyed by the username in the body: only a preHandler sees it parsed.
  async function login(hook: FastifyRateLimitHook | undefined) {
    const { limiter } = fakeClock();
    const keys: string[] = [];
    const app = Fastify();
    await app.register(fastifyRateLimit, {
      limiter: limiter(1),
      hook,
      key: (request) => `user:${(request.body as { user?: string } | undefined)?.user}`,
      onDenied: (_request, denial) => void keys.push(denial.key),
    });
    app.post('/login', () => 'welcome');
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    const post = async (user: string) =>
      (
        await fetch(`${url}/login`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ user }),
        })
      ).status;
    try {
      return { statuses: [await post('ada'), await post('ada'), await post('bob')], keys };
    } finally {
      await app.close();
    }
  }

  it("'preHandler' decides after the body is parsed, so a key may read it", async () => {
    assert.deepEqual(await login('preHandler'), { statuses: [200, 429, 200], keys: ['user:ada'] });
  });

  it("'onRequest' (the default) decides before the body is read", async () => {
    assert.deepEqual(await login(undefined), { statuses: [200, 429, 429], keys: ['user:undefined', 'user:undefined'] });
  });

  it('refuses another hook', async () => {
    const app = Fastify();
    await assert.rejects(
      async () =>
        app.register(fastifyRateLimit, { limiter: fakeClock().limiter(1), hook: 'onSend' as FastifyRateLimitHook }),
      (error: unknown) => error instanceof InvalidOptionError && error.option === 'hook',
    );
    await app.close();
  });
});
