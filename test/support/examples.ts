import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');
// Examples run so far by this process, each in a folder of its own.
let runs = 0;

/** A page's TypeScript blocks (`page` relative to the repository), each a complete program importing 'sluice'. */
export async function examplesOf(page: string): Promise<string[]> {
  const text = await readFile(join(root, page), 'utf8');
  return [...text.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1] ?? '');
}

/**
 * What `example` prints, by its comments: a console.log's output is the comment after it on its
 * line, or else the lines of comment right below it, one line of output each. In order, as the
 * example runs its console.log calls (none in a loop). An example whose console.log shows no output
 * is refused, so every line printed is checked.
 */
export function shownOutput(example: string): string[] {
  const lines = example.split('\n');
  const shown: string[] = [];
  for (const [i, line] of lines.entries()) {
    if (!/\bconsole\.log\(/.test(line)) continue;
    const after = /\);\s*\/\/ (.*)$/.exec(line);
    if (after) {
      shown.push(after[1] ?? '');
      continue;
    }
    const below: string[] = [];
    for (let j = i + 1; j < lines.length && /^\s*\/\/( |$)/.test(lines[j] ?? ''); j++)
      below.push((lines[j] ?? '').replace(/^\s*\/\/ ?/, ''));
    assert.ok(below.length > 0, `console.log with no comment showing its output: ${line.trim()}`);
    shown.push(...below);
  }
  return shown;
}

/** Whether a printed line is the one shown: `…` stands for any text within the line, and nothing else varies. */
export function sameLine(printed: string, shown: string): boolean {
  const literal = (part: string) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${shown.split('…').map(literal).join('.*')}$`).test(printed);
}

/** Runs `example` as a user would (through tsx, 'sluice' being this source) with `env` added: what it printed, and its exit code. */
export async function execExample(
  example: string,
  env: Record<string, string>,
): Promise<{ stdout: string; stderr: string; code: number }> {
  // Inside the project, so that 'ioredis' and the other imports resolve as they would for a user.
  const dir = join(root, 'node_modules', '.cache', `sluice-example-${process.pid}-${++runs}`);
  await mkdir(dir, { recursive: true });
  try {
    const file = join(dir, 'example.mts');
    await writeFile(file, example.replaceAll("from 'sluice'", `from '${join(root, 'src/index.ts')}'`));
    return await run(process.execPath, ['--import', 'tsx', file], { env: { ...process.env, ...env } }).then(
      ({ stdout, stderr }) => ({ stdout, stderr, code: 0 }),
      (error: { stdout?: string; stderr?: string; code?: number }) => ({
        stdout: error.stdout ?? '',
        stderr: error.stderr ?? '',
        code: error.code ?? -1,
      }),
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
/**
 * Runs `example` (see execExample) and asserts that it succeeds printing exactly what its comments
 * show (see shownOutput), line for line.
 */
export async function runExample(name: string, example: string, env: Record<string, string>): Promise<void> {
  const { stdout, stderr, code } = await execExample(example, env);
  assert.equal(code, 0, `${name} failed:\n${stderr}`);
  const printed = stdout === '' ? [] : stdout.replace(/\n$/, '').split('\n');
  const shown = shownOutput(example);
  const report = `${name} printed:\n${stdout}\nand its comments show:\n${shown.join('\n')}\n`;
  assert.equal(printed.length, shown.length, `${report}(${printed.length} lines, not ${shown.length})`);
  for (const [i, line] of printed.entries())
    assert.ok(sameLine(line, shown[i] ?? ''), `${report}line ${i + 1} differs: ${line}`);
}
