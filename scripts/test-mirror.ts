/**
 * Keeps test/ a mirror of the code it tests (test/README.md): a test file in a mirrored folder must
 * name a file beside the one its path points to (test/core/keys.test.ts tests src/core/keys.ts), and
 * a folder of test/ that mirrors nothing must be one of the cross-cutting folders below. Exits 1 on
 * the first kind of mistake; lists the source files with no test file of their own, as information.
 *
 *   npm run -s test:mirror      (npm run lint runs it too)
 */
import { existsSync, readdirSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

const ROOT = join(import.meta.dirname, '..');
const TEST_SUFFIX = '.test.ts';

/** The folders of test/ that mirror a tree of code, and the tree each mirrors. */
const MIRRORS: Record<string, string> = {
  ...Object.fromEntries(
    readdirSync(join(ROOT, 'src'), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => [entry.name, join('src', entry.name)]),
  ),
  lua: 'lua',
  soak: 'soak',
  // The helpers the tests share: a test of one sits beside it.
  support: join('test', 'support'),
};

/** The folders of test/ whose suites span the whole stack (test/README.md says what each holds). */
const CROSS_CUTTING = new Set([
  'conformance',
  'docs',
  'matrix',
  'package',
  'parity',
  'performance',
  'property',
  'redis',
  'runtimes',
]);

/** Every file under `dir` (relative to ROOT) whose name ends with `suffix`, node_modules left out. */
function filesUnder(dir: string, suffix: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    if (entry.name === 'node_modules') return [];
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return filesUnder(path, suffix);
    return entry.name.endsWith(suffix) ? [path] : [];
  });
}

/** What is wrong with where a test file sits, or undefined when its path names the file it tests. */
function misplaced(testFile: string): string | undefined {
  const [folder = '', ...rest] = relative('test', testFile).split(sep);
  if (CROSS_CUTTING.has(folder)) return undefined;
  const tree = MIRRORS[folder];
  if (tree === undefined) {
    return `${testFile}: test/${folder} neither mirrors a folder of code nor is a cross-cutting folder named in scripts/test-mirror.ts`;
  }
  const tested = join(tree, ...rest).slice(0, -TEST_SUFFIX.length) + '.ts';
  if (existsSync(join(ROOT, tested))) return undefined;
  return `${testFile}: names no file of code (${tested} does not exist); name it after the file it tests`;
}

const testFiles = filesUnder('test', TEST_SUFFIX);
const problems = testFiles.map(misplaced).filter((problem) => problem !== undefined);
for (const problem of problems) console.error(problem);

const tested = new Set(testFiles);
const untested = filesUnder('src', '.ts').filter(
  (file) => !tested.has(join('test', relative('src', file)).slice(0, -'.ts'.length) + TEST_SUFFIX),
);
console.log(
  `test/ mirrors src/: ${testFiles.length} test files, ${problems.length} misplaced; ` +
    `${untested.length} source files tested only through others: ${untested.map((f) => relative('src', f)).join(' ')}`,
);
if (problems.length > 0) process.exitCode = 1;
