import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { CHECKED_IN, fileOf, scriptNamed } from '../../lua/scripts.js';

const LUA_DIR = new URL('../../lua/', import.meta.url);
const REWRITE = 'run `npm run scripts -- --write` and commit the Lua diff';

function checkedIn(name: string): string {
  return readFileSync(new URL(fileOf(name), LUA_DIR), 'utf8');
}

/** Where two texts first differ, by line, to name in a failure instead of two whole scripts. */
function firstDifference(file: string, wanted: string): string {
  const have = file.split('\n');
  const want = wanted.split('\n');
  const line = have.findIndex((text, i) => text !== want[i]);
  const at = line === -1 ? have.length : line;
  return `line ${at + 1} is ${JSON.stringify(have[at])}, the code assembles ${JSON.stringify(want[at])}`;
}

describe('lua/: the scripts Redis runs, checked in', () => {
  for (const name of CHECKED_IN) {
    it(`lua/${fileOf(name)} is what the code assembles, byte for byte`, () => {
      const file = checkedIn(name);
      const { lua } = scriptNamed(name);
      if (file !== lua) assert.fail(`lua/${fileOf(name)} is out of date (${firstDifference(file, lua)}): ${REWRITE}`);
    });
  }

  it('holds no other script', () => {
    const files = readdirSync(LUA_DIR).filter((file) => file.endsWith('.lua'));
    assert.deepEqual(files.sort(), CHECKED_IN.map(fileOf).sort(), REWRITE);
  });

  it("a file's SHA-1 is the SHA sluice sends it by (EVALSHA), which a Redis error names", () => {
    for (const name of CHECKED_IN) {
      const sha = createHash('sha1')
        .update(readFileSync(new URL(fileOf(name), LUA_DIR)))
        .digest('hex');
      assert.equal(sha, scriptNamed(name).sha, name);
    }
  });

  it('is ASCII, so that every client sends the same bytes under the same SHA', () => {
    for (const name of CHECKED_IN) assert.match(scriptNamed(name).lua, /^[\x20-\x7e\n]*$/, name);
  });

  it('the helpers and the driver are at the same lines in every script, lone or batch', () => {
    // From the second line (the first names the script) to the end of decideCall, the first line
    // after its start that closes a function at the top level.
    const driverLines = (lua: string) => {
      const lines = lua.split('\n');
      const start = lines.indexOf('local function decideCall(block, KEYS, k, ARGV, now, out, at)');
      return lines.slice(1, lines.indexOf('end', start) + 1);
    };
    const [first, ...rest] = CHECKED_IN.map((name) => driverLines(scriptNamed(name).lua));
    assert.ok(first && first.length > 100);
    for (const lines of rest) assert.deepEqual(lines, first);
  });

  it("a batch's lines are its script's but for the first, up to the batch's own part", () => {
    const lone = scriptNamed('fixed-window').lua.split('\n');
    const batch = scriptNamed('fixed-window.batch').lua.split('\n');
    const ownPart = batch.findIndex((line) => line.startsWith('-- A batch: '));
    assert.ok(ownPart > 0);
    assert.deepEqual(batch.slice(1, ownPart), lone.slice(1, ownPart));
  });
});
