import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { runDemo, serverClockOffset } from '../../src/cli/demo.js';
import { useRedis } from '../support/redis.js';

const harness = useRedis();

/** The lines a page shows `npm start` or `sluice demo` printing: its code block that begins as the demo does. */
async function shownOn(page: string): Promise<string[]> {
  const block = /```\n(naive after crash:[^]*?)```/.exec(await readFile(page, 'utf8'))?.[1];
  assert.ok(block, `${page} shows the demo's output`);
  return block.trimEnd().split('\n');
}

// The two numbers a run may change: Retry-After (the time to the minute's end) and GCRA's 5 or 6.
const run = (line: string) =>
  line.replace(/^Retry-After: \d+/, 'Retry-After: N').replace(/^(gcra .*)[56] of 10$/, '$1N of 10');

describe('demo', () => {
  it('prints its lines with the measured counts and leaves no key behind', async () => {
    const lines: string[] = [];
    await runDemo({ redisUrl: harness.server.url, print: (line) => lines.push(line) });
    assert.equal(lines.length, 10, lines.join('\n'));
    assert.equal(
      lines[0],
      'naive after crash: ttl = -1 | allowed: true true true true false false false false: this client is blocked forever',
    );
    assert.equal(lines[1], 'EXPIRE NX on a key without TTL -> 1 , again -> 0');
    assert.equal(lines[2], '429 Too Many Requests');
    const retryAfter = /^Retry-After: (\d+) \| remaining 0$/.exec(lines[3] ?? '');
    assert.ok(retryAfter, lines[3]);
    assert.ok(Number(retryAfter[1]) >= 1 && Number(retryAfter[1]) <= 60, lines[3]);
    assert.equal(lines[4], 'fixed window: allowed in 200 ms around the edge: 10 of 10 (limit is 5 per second)');
    assert.equal(lines[5], 'sliding log : allowed in 200 ms around the edge: 5 of 10');
    assert.equal(
      lines[6],
      'token bucket: capacity 3, 1 token a second: 5 quick calls then one after 1.1 s -> 1 1 1 0 0 1',
    );
    // GCRA at 5 per second earns one request every 200 ms, and the bursts are 200 ms apart: whether
    // the second burst gets that one depends on which side of 200 ms the measured gap falls.
    // test/algorithms/gcra.test.ts pins both sides with a fake clock.
    assert.match(lines[7] ?? '', /^gcra {8}: allowed in 200 ms around the edge: [56] of 10$/);
    assert.equal(lines[8], 'sliding window: allowed in 200 ms around the edge: 5 of 10');
    assert.equal(lines[9], 'concurrency : 3 slots, 5 overlapping calls -> 1 1 1 0 0, one released -> 1');
    assert.equal(await harness.redis.dbsize(), 0);
    for (const page of ['README.md', 'docs/cli.md'])
      assert.deepEqual((await shownOn(page)).map(run), lines.map(run), page);
  });

  it('estimates the server clock from its fastest replies, not one that waited 150 ms for a busy event loop', async () => {
    // The server runs on this machine's clock: the offset is 0, up to the round trip's rounding.
    const estimate = serverClockOffset(harness.redis);
    // The first TIME is sent; its reply is read only after this, as under load.
    const until = Date.now() + 150;
    while (Date.now() < until);
    const offsetMs = await estimate;
    // The busy reply alone would put it 75 ms off. The others bound the error by half their round
    // trip: a few ms on a quiet machine, tens on one running the whole suite.
    assert.ok(Math.abs(offsetMs) <= 30, `estimated ${offsetMs} ms`);
  });
});
