import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';

// After `npm run build` (npm test's pretest). Plain node, not tsx: tsx would map `sluice/*` to the
// source (tsconfig paths), and this checks what users get from the package's exports map.
const root = new URL('../../', import.meta.url);
// Each subpath, and what it is used through: a middleware, a plugin, or Nest's module.
const entries = {
  express: 'rateLimit',
  fastify: 'rateLimit',
  hono: 'rateLimit',
  koa: 'rateLimit',
  nestjs: 'RateLimitModule',
  node: 'rateLimit',
};
const subpaths = Object.keys(entries) as Array<keyof typeof entries>;
const frameworks = [
  'express',
  'fastify',
  'hono',
  'koa',
  '@hono/node-server',
  '@nestjs/platform-express',
  '@nestjs/common',
  '@nestjs/core',
];
// Nest's decorators and dependency injection are its own: its guard is made of them, through the
// app's copy of Nest (an optional peer), and of nothing else of a framework.
const builtOn: Partial<Record<keyof typeof entries, string[]>> = { nestjs: ['@nestjs/common', '@nestjs/core'] };

const probe = `
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const found = {};
for (const [subpath, entry] of Object.entries(${JSON.stringify(entries)})) {
  const name = 'sluice/' + subpath;
  found[subpath] = [import.meta.resolve(name), typeof (await import(name))[entry], require.resolve(name), typeof require(name)[entry]];
}
console.log(JSON.stringify(found));
`;

describe('adapter subpaths of the built package', () => {
  it('load from ESM and CommonJS, from dist', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', probe], { cwd: root });
    const found = JSON.parse(stdout) as Record<string, [string, string, string, string]>;
    for (const subpath of subpaths) {
      assert.deepEqual(found[subpath], [
        new URL(`dist/esm/adapters/${subpath}.js`, root).href,
        'function',
        new URL(`dist/cjs/adapters/${subpath}.js`, root).pathname,
        'function',
      ]);
    }
  });

  it('type-check the setup of every framework, from ESM and CommonJS, against the built types', async () => {
    const tsc = new URL('node_modules/typescript/bin/tsc', root).pathname;
    await promisify(execFile)(process.execPath, [tsc, '-p', 'test/package/consumer'], { cwd: root });
  });

  it('serve a Nest app from the CommonJS build, as Nest apps are built', async () => {
    // Decorators called as functions: plain node compiles no decorator syntax.
    const app = `
const { Controller, Get, Module } = require('@nestjs/common');
const { APP_GUARD, NestFactory } = require('@nestjs/core');
const { createLimiter, fixedWindow, memoryStore } = require('sluice');
const { RateLimitGuard, RateLimitModule, SkipRateLimit } = require('sluice/nestjs');
class Routes { home() { return 'home'; } health() { return 'ok'; } }
Controller()(Routes);
const method = (name) => [Routes.prototype, name, Object.getOwnPropertyDescriptor(Routes.prototype, name)];
Get()(...method('home'));
Get('health')(...method('health'));
SkipRateLimit()(...method('health'));
class AppModule {}
const limiter = createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 1, window: '1h', name: 'hourly' }) });
Module({ imports: [RateLimitModule.forRoot({ limiter })], controllers: [Routes], providers: [{ provide: APP_GUARD, useClass: RateLimitGuard }] })(AppModule);
(async () => {
  const app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const url = await app.getUrl();
  for (const path of ['/', '/', '/health']) {
    const reply = await fetch(url + path);
    console.log(reply.status, reply.headers.get('content-type'), reply.headers.has('ratelimit'));
  }
  await app.close();
})();
`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=commonjs', '-e', app], { cwd: root });
    assert.deepEqual(stdout.trim().split('\n'), [
      '200 text/html; charset=utf-8 true',
      '429 application/problem+json true',
      '200 text/html; charset=utf-8 false',
    ]);
  });

  it('load nothing of the frameworks, which are optional peers, but the Nest core that the Nest guard is made of', async () => {
    for (const subpath of subpaths) {
      for (const flavour of ['esm', 'cjs']) {
        const code = await readFile(new URL(`dist/${flavour}/adapters/${subpath}.js`, root), 'utf8');
        for (const framework of frameworks.filter((name) => !builtOn[subpath]?.includes(name))) {
          assert.ok(
            !code.includes(`from '${framework}'`) && !code.includes(`require("${framework}")`),
            `${flavour} ${subpath} loads ${framework}`,
          );
        }
      }
    }
  });
});
