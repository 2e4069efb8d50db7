import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { cachedServer, type MatrixServer } from './servers.js';

/** The test files run on each server of the matrix too, besides the redis-server on PATH. */
export const MATRIX_FILES = [
  'test/conformance/conformance.test.ts',
  'test/limiter/joint.test.ts',
  'test/conformance/operations.test.ts',
  'test/redis/acl.test.ts',
  'test/redis/late-calls.test.ts',
  'test/redis/script-lines.test.ts',
  'test/redis/cluster.test.ts',
];

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Runs one test file in a node process of its own with SLUICE_SERVER=`id`: its exit code and output. */
function runFile(
  file: string,
  id: MatrixServer,
  signal: AbortSignal,
): Promise<{ code: number | null; output: string }> {
  // NODE_TEST_CONTEXT tells a node process it runs under a test runner: this one is a runner of its own.
  const env: NodeJS.ProcessEnv = { ...process.env, SLUICE_SERVER: id, NO_COLOR: '1' };
  delete env.NODE_TEST_CONTEXT;
  const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=spec', file], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    // Stopped with the test that runs it (its timeout).
    signal,
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, output }));
  });
}

/**
 * One test per file of MATRIX_FILES, which runs the file on the server `id` (test/matrix/build.sh
 * builds it). Where it is not built they are skipped, saying so; in CI (CI=true) they fail.
 */
export function runOnServer(id: MatrixServer): void {
  const server = cachedServer(id);
  const missing = `${id} is not built here: test/matrix/build.sh builds it`;
  const skip = server === undefined && process.env.CI !== 'true' ? missing : false;
  // One file at a time: beside the rest of npm test, two at once loaded CI's 2 cores past the
  // tests' timeouts (a 1 s store call, a cluster's 2 s node timeout).
  describe(`on ${server?.name ?? id}`, { concurrency: 1 }, () => {
    for (const file of MATRIX_FILES) {
      it(file, { skip }, async (t) => {
        assert.ok(server, missing);
        const { code, output } = await runFile(file, id, t.signal);
        // The spec reporter lists the failures last, after every test's line.
        const failures = output.slice(Math.max(0, output.indexOf('failing tests:')));
        assert.equal(code, 0, `${file} failed on ${server.name}:\n${failures}`);
      });
    }
  });
}
