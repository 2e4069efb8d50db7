import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { batchArguments, settle, type Request } from '../../src/engine/batch.js';

function request(keys: string[], args: string[]): Request & { outcome?: unknown } {
  const r: Request & { outcome?: unknown } = {
    keys,
    args,
    settle: (reply) => (r.outcome = reply),
    fail: (error) => (r.outcome = error instanceof Error ? error.message : error),
  };
  return r;
}

describe('batch layout', () => {
  it('sends shared args once per group, and runs the requests group by group', () => {
    const a = request(['b1', 'k1'], ['1', '0', '5']);
    const b = request(['b2', 'k2'], ['2', '0', '5']);
    const c = request(['b3', 'k3'], ['1', '0', '5']);
    const { keys, args, order } = batchArguments([a, b, c], '1700000000123');
    assert.deepEqual(order, [a, c, b]);
    // Every request's block key first, then their other keys, in the order they run.
    assert.deepEqual(keys, ['b1', 'b3', 'b2', 'k1', 'k3', 'k2']);
    assert.deepEqual(args, ['1700000000123', '3', '2', '2', '3', '1', '0', '5', '1', '2', '3', '2', '0', '5']);
  });

  it('hands each request its reply or its error, and fails the rest past a malformed part', () => {
    const requests = [request([], []), request([], []), request([], []), request([], [])];
    // The batch's now first: each reply begins with it, as a lone call's does.
    settle(requests.slice(0, 3), [1000, 2, 10, 20, -1, 'WRONGTYPE x', 1, 7], (message) => new Error(message));
    assert.deepEqual(
      requests.slice(0, 3).map((r) => r.outcome),
      [[1000, 10, 20], 'WRONGTYPE x', [1000, 7]],
    );
    settle(requests.slice(2), [1000, 1, 9, 'junk'], (message) => new Error(message));
    assert.deepEqual(requests[2]?.outcome, [1000, 9]);
    assert.match(String(requests[3]?.outcome), /the batch script replied \[1000,1,9,"junk"\]/);
  });
});
