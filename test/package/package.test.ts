import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';

// These tests read the built package (dist/, built by `npm test`'s pretest step) through its
// exports map, the way a user's code would.
const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');
const API = [
  'createLimiter',
  'createJointLimiter',
  'fixedWindow',
  'slidingLog',
  'tokenBucket',
  'memoryStore',
  'redisStore',
  'rateLimitResponse',
  'InvalidOptionError',
];

describe('the built package', () => {
  it('imports from ESM and CommonJS with the same API', async () => {
    const esm = (
      await run(
        process.execPath,
        ['--input-type=module', '-e', "import * as s from 'sluice'; console.log(Object.keys(s).sort().join(','))"],
        { cwd: root },
      )
    ).stdout;
    const cjs = Object.keys(createRequire(join(root, 'package.json'))('sluice') as object)
      .sort()
      .join(',');
    assert.equal(esm.trim(), cjs);
    for (const name of API) assert.ok(cjs.split(',').includes(name), name);
  });

  it('decides from the CommonJS build', async () => {
    const script = `const { createLimiter, memoryStore, fixedWindow } = require('sluice');
      const l = createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 1, window: '1m' }) });
      l.limit('k').then(a => l.limit('k').then(b => console.log(a.allowed, b.allowed)));`;
    assert.equal((await run(process.execPath, ['-e', script], { cwd: root })).stdout.trim(), 'true false');
  });

  it('type-checks for TypeScript users of ESM and CommonJS', async () => {
    const dir = join(root, 'node_modules', '.cache', 'sluice-types');
    await mkdir(dir, { recursive: true });
    try {
      const consumer = `import { createLimiter, memoryStore, tokenBucket, type Decision } from 'sluice';
const limiter = createLimiter({ store: memoryStore(), policy: tokenBucket({ capacity: 2, refillPerSecond: 1 }) });
export const decision: Promise<Decision> = limiter.limit('k', { cost: 2 });
// @ts-expect-error a cost is a number
limiter.limit('k', { cost: '2' });
`;
      await writeFile(join(dir, 'esm.mts'), consumer);
      await writeFile(join(dir, 'cjs.cts'), consumer);
      const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
      await run(
        process.execPath,
        [
          tsc,
          '--noEmit',
          '--strict',
          '--module',
          'nodenext',
          '--moduleResolution',
          'nodenext',
          '--types',
          'node',
          join(dir, 'esm.mts'),
          join(dir, 'cjs.cts'),
        ],
        { cwd: root },
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('ships the sluice command', async () => {
    const { stdout } = await run(process.execPath, [join(root, 'dist/esm/cli/main.js'), '--help']);
    assert.match(stdout, /Usage: sluice <command>/);
    await assert.rejects(
      run(process.execPath, [join(root, 'dist/esm/cli/main.js'), 'nonsense']),
      (error: { code?: number; stderr?: string }) => error.code === 2 && /unknown command/.test(error.stderr ?? ''),
    );
  });
});
