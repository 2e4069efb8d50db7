import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { useRedis } from '../support/redis.js';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');
const harness = useRedis();

/** The README's TypeScript blocks, each a complete program importing 'sluice'. */
async function readmeExamples(): Promise<string[]> {
  const readme = await readFile(join(root, 'README.md'), 'utf8');
  return [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1] ?? '');
}

describe('README examples', () => {
  it('run as written against a real Redis, and print what their comments say', async () => {
    const examples = await readmeExamples();
    assert.ok(examples.length >= 2);
    // Inside the project, so that 'ioredis' and the other imports resolve as they would for a user.
    const dir = join(root, 'node_modules', '.cache', 'sluice-readme');
    await mkdir(dir, { recursive: true });
    try {
      for (const [i, example] of examples.entries()) {
        const file = join(dir, `example-${i}.mts`);
        await writeFile(file, example.replaceAll("from 'sluice'", `from '${join(root, 'src/index.ts')}'`));
        const { stdout } = await run(process.execPath, ['--import', 'tsx', file], { env: { ...process.env, REDIS_URL: harness.server.url } });
        // A comment after a console.log states its output: `…` stands for any text, spaces for any spacing.
        for (const [, expected] of example.matchAll(/console\.log\(.*\);\s*\/\/ (.*)$/gm)) {
          const literal = (part: string) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/ +/g, '\\s+');
          const pattern = (expected ?? '').split('…').map(literal).join('[^]*?');
          assert.match(stdout, new RegExp(`^${pattern}$`, 'm'), `README example ${i}: output should show ${expected}\n${stdout}`);
        }
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
