/**
 * The Lua that sluice sends to Redis, as files: what src/engine/driver.ts and batch.ts assemble,
 * byte for byte, checked in beside this file. A change to the Lua then shows as a Lua diff in
 * review (test/lua/scripts.test.ts fails until the files are written again), and the line of a
 * `user_script:NN` error is line NN of its file (the SHA the error names is the file's SHA-1).
 *
 *   npm run -s scripts                           every checked-in script, each under its file's name
 *   npm run -s scripts -- fixed-window           one script, as Redis runs it
 *   npm run -s scripts -- fixed-window+gcra      the script of a limiter with these algorithms
 *   npm run -s scripts -- gcra.batch             the batch form; .without-pexpiretime: Redis 6.2's
 *   npm run scripts -- --write                   writes the checked-in files again
 */
import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { batchScript } from '../src/engine/batch.js';
import { scriptFor } from '../src/engine/driver.js';
import { enginePolicy, type Algorithm } from '../src/engine/algorithm.js';
import { concurrency, fixedWindow, gcra, slidingLog, slidingWindow, tokenBucket } from '../src/index.js';

/** Each algorithm by the name its policy reports (`Policy.algorithm`); the parameters do not reach the Lua. */
const ALGORITHMS: ReadonlyMap<string, Algorithm> = new Map(
  [
    fixedWindow({ limit: 1, window: '1s' }),
    slidingLog({ limit: 1, window: '1s' }),
    slidingWindow({ limit: 1, window: '1s' }),
    tokenBucket({ capacity: 1, refillPerSecond: 1 }),
    gcra({ limit: 1, period: '1s' }),
    concurrency({ limit: 1, leaseMs: '1s' }),
  ].map((policy) => [policy.algorithm, enginePolicy(policy).kind]),
);

const ALL = 'all-algorithms';
const BATCH = '.batch';
const WITHOUT_PEXPIRETIME = '.without-pexpiretime';

/**
 * The scripts checked in, by name: a limiter with each single algorithm, with all of them, the
 * forms for a server without PEXPIRETIME of the algorithms that have one (so that every line sent
 * to Redis 6.2 is in a file too), and one batch (its lines past the loop's header are its script's).
 */
export const CHECKED_IN: readonly string[] = [
  ...ALGORITHMS.keys(),
  ...[...ALGORITHMS].filter(([, a]) => a.luaWithoutPexpiretime !== undefined).map(([n]) => n + WITHOUT_PEXPIRETIME),
  ALL,
  `fixed-window${BATCH}`,
];

/** A script's file under lua/. */
export function fileOf(name: string): string {
  return `${name}.lua`;
}

function withoutSuffix(name: string, suffix: string): [string, boolean] {
  return name.endsWith(suffix) ? [name.slice(0, -suffix.length), true] : [name, false];
}

/** What a script's name asks for: a limiter's algorithms (`all-algorithms`, or names joined by `+`), and its form. */
export function parseName(name: string): { algorithms: string[]; batch: boolean; withoutPexpiretime: boolean } {
  const [form, withoutPexpiretime] = withoutSuffix(name, WITHOUT_PEXPIRETIME);
  const [base, batch] = withoutSuffix(form, BATCH);
  const algorithms = base === ALL ? [...ALGORITHMS.keys()] : base.split('+');
  const unknown = algorithms.find((algorithm) => !ALGORITHMS.has(algorithm));
  if (unknown !== undefined)
    throw new Error(
      `no script "${name}": name ${ALL} or algorithms joined by + (${[...ALGORITHMS.keys()].join(', ')}), then ${BATCH} and/or ${WITHOUT_PEXPIRETIME}`,
    );
  return { algorithms, batch, withoutPexpiretime };
}

/**
 * A named script as Redis receives it (see parseName): a batch in its packed form, as Node's
 * clients take it; the form for a server without PEXPIRETIME where the name asks for it.
 */
export function scriptNamed(name: string): { readonly lua: string; readonly sha: string } {
  const { algorithms, batch, withoutPexpiretime } = parseName(name);
  let script = scriptFor(algorithms.map((algorithm) => ALGORITHMS.get(algorithm) as Algorithm));
  if (withoutPexpiretime) {
    if (script.withoutPexpiretime === undefined)
      throw new Error(`no script "${name}": it calls no PEXPIRETIME, and runs on Redis 6.2 as it is`);
    script = script.withoutPexpiretime;
  }
  return batch ? batchScript(script, true) : script;
}

/** Writes every checked-in script, and removes any other .lua file in lua/. */
function writeAll(): void {
  const wanted = new Set(CHECKED_IN.map(fileOf));
  for (const file of readdirSync(import.meta.dirname))
    if (file.endsWith('.lua') && !wanted.has(file)) rmSync(join(import.meta.dirname, file));
  for (const name of CHECKED_IN) writeFileSync(join(import.meta.dirname, fileOf(name)), scriptNamed(name).lua);
  console.log(`wrote ${CHECKED_IN.length} scripts to lua/`);
}

function main(argv: readonly string[]): void {
  if (argv.includes('--write')) return writeAll();
  const names = argv.length > 0 ? argv : CHECKED_IN;
  if (names.length === 1) process.stdout.write(scriptNamed(names[0] as string).lua);
  else for (const name of names) process.stdout.write(`==> lua/${fileOf(name)} <==\n${scriptNamed(name).lua}\n`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  try {
    main(process.argv.slice(2));
  } catch (error) {
    console.error((error as Error).message);
    process.exitCode = 1;
  }
}
