import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';

// What a user installs: a fresh clone of this commit (so no dist/, as from git or a CI checkout),
// packed by `npm pack` (which builds it through `prepare`), installed into an empty project
// without the network. Uncommitted changes are not in it.
const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');
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
// Building takes half a minute on a busy machine: more than the suite's default per test.
const PACK_TIMEOUT_MS = 600_000;

// A TypeScript user's entry file: strict, so a subpath whose types do not resolve fails (TS7016).
// skipLibCheck, as most projects set it: the frameworks' own declarations are not ours to check.
const typedEntry = `import { createLimiter, fixedWindow, memoryStore, type Decision } from 'sluice';
${subpaths.map((s) => `import { ${entries[s]} as ${s} } from 'sluice/${s}';`).join('\n')}
const limiter = createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 1, window: '1m' }) });
export const decision: Promise<Decision> = limiter.limit('k');
export type Middleware = [${subpaths.map((s) => `typeof ${s}`).join(', ')}];
// @ts-expect-error a cost is a number
limiter.limit('k', { cost: '2' });
`;
// A Nest app as Nest's own starter sets one up: CommonJS, node10 resolution, decorator syntax.
const nestEntry = `import { Controller, Get, Module, Req } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import type { Request } from 'express';
import { createLimiter, fixedWindow, memoryStore } from 'sluice';
import { RateLimit, RateLimitGuard, RateLimitModule, SkipRateLimit, type RateLimitInfo } from 'sluice/nestjs';
const limiter = createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 10, window: '1m' }) });
const login = createLimiter({ store: memoryStore(), prefix: 'login', policy: fixedWindow({ limit: 5, window: '15m' }) });
@Controller()
@RateLimit({ headers: 'draft-7' })
export class AppController {
  @Get()
  home(@Req() req: Request): RateLimitInfo | undefined {
    return req.rateLimit;
  }
  @Get('login')
  @RateLimit({ limiter: login })
  login() {
    return 'login';
  }
  @Get('health')
  @SkipRateLimit()
  health() {
    return 'ok';
  }
}
@Module({
  imports: [RateLimitModule.forRoot({ limiter, key: (req) => req.ip ?? 'unknown' })],
  controllers: [AppController],
  providers: [{ provide: APP_GUARD, useClass: RateLimitGuard }],
})
export class AppModule {}
// @ts-expect-error a status is a number
RateLimit({ status: '429' });
`;
// A Nest app that serves itself and asks itself: two requests admitted, the third denied, a route skipped.
const nest10App = `import 'reflect-metadata';
import { Controller, Get, Module } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { createLimiter, fixedWindow, memoryStore } from 'sluice';
import { RateLimit, RateLimitGuard, RateLimitModule, SkipRateLimit } from 'sluice/nestjs';
const limiter = createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 2, window: '1m' }) });
@Controller()
@RateLimit({ headers: 'draft-7' })
class AppController {
  @Get()
  home() {
    return 'home';
  }
  @Get('health')
  @SkipRateLimit()
  health() {
    return 'ok';
  }
}
@Module({
  imports: [RateLimitModule.forRoot({ limiter, key: () => 'one client' })],
  controllers: [AppController],
  providers: [{ provide: APP_GUARD, useClass: RateLimitGuard }],
})
class AppModule {}
async function main() {
  const app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const url = await app.getUrl();
  const answers = [];
  for (const path of ['/', '/', '/', '/health']) {
    const response = await fetch(url + path);
    answers.push([path, response.status, response.headers.get('ratelimit'), response.headers.get('retry-after')]);
  }
  await app.close();
  console.log(JSON.stringify(answers));
}
void main();
`;
// Each resolution a TypeScript project may use, with the entry files it compiles (.ts is CommonJS
// under node16 here: the project's package.json has no "type").
const resolutions = {
  node10: {
    args: [
      '--module',
      'commonjs',
      '--moduleResolution',
      'node10',
      '--experimentalDecorators',
      '--emitDecoratorMetadata',
    ],
    files: ['entry.ts', 'nest.ts'],
  },
  node16: { args: ['--module', 'node16', '--moduleResolution', 'node16'], files: ['entry.ts', 'entry.mts'] },
  bundler: { args: ['--module', 'esnext', '--moduleResolution', 'bundler'], files: ['entry.ts'] },
};
// Checkers of the packed tarball, run when their devDependency is installed.
// sluice/serve is ESM only, as the command it serves (docs/service.md): checked apart, under attw's
// esm-only profile. The tarball comes first: attw's entrypoint options take every argument after them.
const linters = {
  '@arethetypeswrong/cli': ['attw', ['--exclude-entrypoints', './serve']],
  '@arethetypeswrong/cli on sluice/serve, ESM only': ['attw', ['--entrypoints', './serve', '--profile', 'esm-only']],
  publint: ['publint', ['--strict']],
} as const;

let work = '';
let tarball = '';
let project = '';

describe('a fresh clone, packed and installed into an empty project', () => {
  before(
    async () => {
      work = await mkdtemp(join(tmpdir(), 'sluice-install-'));
      const clone = join(work, 'clone');
      const head = (await run('git', ['rev-parse', 'HEAD'], { cwd: root })).stdout.trim();
      await run('git', ['clone', '--quiet', '--no-checkout', root, clone]);
      await run('git', ['checkout', '--quiet', head], { cwd: clone });
      // The build's tools, which a clone would get from `npm ci`.
      await symlink(join(root, 'node_modules'), join(clone, 'node_modules'));
      await run('npm', ['pack', '--silent', '--pack-destination', work], { cwd: clone });
      const packed = (await readdir(work)).filter((name) => name.endsWith('.tgz'));
      assert.equal(packed.length, 1);
      tarball = join(work, packed[0] as string);
      project = join(work, 'project');
      await mkdir(project);
      await writeFile(
        join(project, 'package.json'),
        JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }),
      );
      await run('npm', ['install', '--offline', '--no-audit', '--no-fund', '--silent', tarball], { cwd: project });
      // Nest, which sluice/nestjs is made of (an optional peer), as a Nest app has it.
      await symlink(join(root, 'node_modules', '@nestjs'), join(project, 'node_modules', '@nestjs'));
    },
    { timeout: PACK_TIMEOUT_MS },
  );

  after(async () => {
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('imports every entry point from ESM and CommonJS, and decides', async () => {
    const names = ['sluice', ...subpaths.map((s) => `sluice/${s}`)];
    const esm = `const kinds = [];
      for (const name of ${JSON.stringify(names)}) { const m = await import(name); kinds.push(typeof (m.createLimiter ?? m.rateLimit ?? m.RateLimitModule)); }
      const { createLimiter, memoryStore, fixedWindow } = await import('sluice');
      const limiter = createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 1, window: '1m' }) });
      console.log(kinds.join(' '), (await limiter.limit('k')).allowed, (await limiter.limit('k')).allowed);`;
    const cjs = esm.replaceAll('await import(', 'require(').replace(/^/, '(async () => {').concat('})()');
    const expected = `${names.map(() => 'function').join(' ')} true false`;
    assert.equal(
      (await run(process.execPath, ['--input-type=module', '-e', esm], { cwd: project })).stdout.trim(),
      expected,
    );
    assert.equal(
      (await run(process.execPath, ['--input-type=commonjs', '-e', cjs], { cwd: project })).stdout.trim(),
      expected,
    );
  });

  it('resolves the types of every entry point under node10, node16 and bundler', async () => {
    await writeFile(join(project, 'entry.ts'), typedEntry);
    await writeFile(join(project, 'entry.mts'), typedEntry);
    await writeFile(join(project, 'nest.ts'), nestEntry);
    // The frameworks' types, which the adapters' declarations import, as the user's project has them.
    for (const dependency of ['@types', 'fastify', 'hono'])
      await symlink(join(root, 'node_modules', dependency), join(project, 'node_modules', dependency));
    const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    for (const [resolution, { args, files }] of Object.entries(resolutions)) {
      const checked = run(
        process.execPath,
        [tsc, '--noEmit', '--strict', '--skipLibCheck', '--types', 'node', ...args, ...files],
        { cwd: project },
      );
      const { stdout } = await checked.catch((error: { stdout: string }) => error);
      assert.equal(stdout, '', resolution);
    }
  });

  for (const [name, [bin, args]] of Object.entries(linters)) {
    it(`passes ${name}`, async () => {
      await run(join(root, 'node_modules', '.bin', bin), [tarball, ...args], { cwd: work });
    });
  }

  it('ships its licence, changelog, examples and proto, no source maps, whose sources are not shipped, and one build of the command', async () => {
    const files = (await run('tar', ['-tzf', tarball])).stdout.trim().split('\n');
    assert.deepEqual(
      files.filter((file) => file.endsWith('.map') || file.startsWith('package/dist/cjs/cli/')),
      [],
    );
    for (const file of [
      'package/dist/esm/cli/main.js',
      'package/LICENSE',
      'package/CHANGELOG.md',
      // What the docs run and link to: `sluice serve --config node_modules/sluice/examples/service/ratelimit.yaml`.
      'package/examples/service/ratelimit.yaml',
      'package/src/serve/proto/ratelimit.proto',
    ])
      assert.ok(files.includes(file), file);
  });

  it('guards a Nest 10 app, the oldest Nest its peer range takes', async () => {
    // A project with Nest 10 alone (installed by pretest in test/package/nest10), so that sluice's
    // adapter and the app load one Nest: the project's own.
    const nest10 = join(root, 'test', 'package', 'nest10', 'node_modules');
    const app = join(work, 'nest10');
    await mkdir(app);
    await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'nest10-app', version: '1.0.0', private: true }));
    await run('npm', ['install', '--offline', '--no-audit', '--no-fund', '--silent', tarball], { cwd: app });
    for (const name of await readdir(nest10))
      if (!name.startsWith('.')) await symlink(join(nest10, name), join(app, 'node_modules', name));
    await symlink(join(root, 'node_modules', '@types'), join(app, 'node_modules', '@types'));
    await writeFile(join(app, 'main.ts'), nest10App);
    const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    const compiled = await run(
      process.execPath,
      [
        tsc,
        ...resolutions.node10.args,
        '--strict',
        '--skipLibCheck',
        '--types',
        'node',
        '--target',
        'es2022',
        'main.ts',
      ],
      { cwd: app },
    ).catch((error: { stdout: string }) => error);
    assert.equal(compiled.stdout, '');
    const answers = JSON.parse((await run(process.execPath, ['main.js'], { cwd: app })).stdout) as [
      string,
      number,
      string | null,
      string | null,
    ][];
    assert.deepEqual(
      answers.map(([path, status, rateLimit, retryAfter]) => [
        path,
        status,
        rateLimit?.replace(/reset=\d+/, 'reset=R') ?? null,
        retryAfter === null ? null : 'given',
      ]),
      [
        ['/', 200, 'limit=2, remaining=1, reset=R', null],
        ['/', 200, 'limit=2, remaining=0, reset=R', null],
        ['/', 429, 'limit=2, remaining=0, reset=R', 'given'],
        ['/health', 200, null, null],
      ],
    );
  });

  it('installs the sluice command', async () => {
    const { stdout } = await run(join(project, 'node_modules', '.bin', 'sluice'), ['--help'], { cwd: project });
    assert.match(stdout, /^Usage: sluice <command>/);
  });
});
