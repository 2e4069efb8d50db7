import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');

/** A page's TypeScript blocks (`page` relative to the repository), each a complete program importing 'sluice'. */
export async function examplesOf(page: string): Promise<string[]> {
  const text = await readFile(join(root, page), 'utf8');
  return [...text.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1] ?? '');
}

/**
 * Runs `example` as a user would (through tsx, 'sluice' being this source) with `env` added, and
 * asserts that it prints what its comments say: a comment after a console.log states its output,
 * `…` standing for any text and spaces for any spacing.
 */
export async function runExample(name: string, example: string, env: Record<string, string>): Promise<void> {
  // Inside the project, so that 'ioredis' and the other imports resolve as they would for a user.
  const dir = join(root, 'node_modules', '.cache', `sluice-example-${process.pid}`);
  await mkdir(dir, { recursive: true });
  try {
    const file = join(dir, 'example.mts');
    await writeFile(file, example.replaceAll("from 'sluice'", `from '${join(root, 'src/index.ts')}'`));
    const { stdout } = await run(process.execPath, ['--import', 'tsx', file], { env: { ...process.env, ...env } });
    for (const [, expected] of example.matchAll(/console\.log\(.*\);\s*\/\/ (.*)$/gm)) {
      const literal = (part: string) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/ +/g, '\\s+');
      const pattern = (expected ?? '').split('…').map(literal).join('[^]*?');
      assert.match(stdout, new RegExp(`^${pattern}$`, 'm'), `${name}: output should show ${expected}\n${stdout}`);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
