import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { batchArguments, settle, type Request } from '../../src/engine/batch.js';

function request(keys: string[], args: string[]): Request & { outcome?: unknown } {
  const r: Request & { outcome?: unknown } = {
    keys,
    args,
    resolve: (reply) => (r.outcome = reply),
    reject: (error) => (r.outcome = error instanceof Error ? error.message : error),
  };
  return r;
}

describe('batch layout', () => {
  it('sends shared args once per group, and runs the requests group by group', () => {
    const a = request(['k1'], ['1', '0', '5']);
    const b = request(['k2'], ['2', '0', '5']);
    const c = request(['k3'], ['1', '0', '5']);
    const { keys, args, order } = batchArguments([a, b, c], '1700000000123');
    assert.deepEqual(order, [a, c, b]);
    assert.deepEqual(keys, ['k1', 'k3', 'k2']);
    assert.deepEqual(args, ['1700000000123', '2', '1', '3', '1', '0', '5', '1', '1', '3', '2', '0', '5']);
  });

  it('hands each request its reply or its error, and fails the rest past a malformed part', () => {
    const requests = [request([], []), request([], []), request([], []), request([], [])];
    settle(requests.slice(0, 3), [2, 10, 20, -1, 'WRONGTYPE x', 1, 7], (message) => new Error(message));
    assert.deepEqual(
      requests.slice(0, 3).map((r) => r.outcome),
      [[10, 20], 'WRONGTYPE x', [7]],
    );
    settle(requests.slice(2), [1, 9, 'junk'], (message) => new Error(message));
    assert.deepEqual(requests[2]?.outcome, [9]);
    assert.match(String(requests[3]?.outcome), /the batch script replied \[1,9,"junk"\]/);
  });
});
