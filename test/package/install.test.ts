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
const subpaths = ['express', 'fastify', 'hono', 'koa', 'node'];
// Building takes half a minute on a busy machine: more than the suite's default per test.
const PACK_TIMEOUT_MS = 600_000;

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
      await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }));
      await run('npm', ['install', '--offline', '--no-audit', '--no-fund', '--silent', tarball], { cwd: project });
    },
    { timeout: PACK_TIMEOUT_MS },
  );

  after(async () => {
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('imports every entry point from ESM and CommonJS, and decides', async () => {
    const names = ['sluice', ...subpaths.map((s) => `sluice/${s}`)];
    const esm = `const kinds = [];
      for (const name of ${JSON.stringify(names)}) { const m = await import(name); kinds.push(typeof (m.createLimiter ?? m.rateLimit)); }
      const { createLimiter, memoryStore, fixedWindow } = await import('sluice');
      const limiter = createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 1, window: '1m' }) });
      console.log(kinds.join(' '), (await limiter.limit('k')).allowed, (await limiter.limit('k')).allowed);`;
    const cjs = esm.replaceAll('await import(', 'require(').replace(/^/, '(async () => {').concat('})()');
    const expected = `${names.map(() => 'function').join(' ')} true false`;
    assert.equal((await run(process.execPath, ['--input-type=module', '-e', esm], { cwd: project })).stdout.trim(), expected);
    assert.equal((await run(process.execPath, ['--input-type=commonjs', '-e', cjs], { cwd: project })).stdout.trim(), expected);
  });

  it('installs the sluice command', async () => {
    const { stdout } = await run(join(project, 'node_modules', '.bin', 'sluice'), ['--help'], { cwd: project });
    assert.match(stdout, /^Usage: sluice <command>/);
  });
});
