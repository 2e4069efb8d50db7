import assert from 'node:assert/strict';
import { it } from 'node:test';
import { fixedWindow, gcra } from '../../src/index.js';
import { enginePolicy } from '../../src/engine/algorithm.js';
import { argsCall, scriptArgs, type Call } from '../../src/engine/driver.js';

it('argsCall reads back the operation, cost and target that scriptArgs writes', () => {
  const policies = [
    enginePolicy(fixedWindow({ limit: 5, window: '1m' })),
    enginePolicy(gcra({ limit: 3, period: '1s' })),
  ];
  const calls: Call[] = [
    { op: 'limit', cost: 2, target: 0, ms: 0, penalty: { strikes: 0, blockMs: 0 }, policies },
    { op: 'refund', cost: 1, target: 1_700_000_000_123, ms: 0, penalty: { strikes: 3, blockMs: 60_000 }, policies },
    { op: 'take', cost: 4, target: 1, ms: 0, penalty: { strikes: 0, blockMs: 0 }, policies: policies.slice(0, 1) },
    { op: 'settle', cost: [1, -2], target: 5, ms: 0, penalty: { strikes: 0, blockMs: 0 }, policies },
  ];
  assert.deepEqual(
    calls.map((call) => argsCall(scriptArgs(call))),
    [
      { op: 'limit', cost: 2, target: 0 },
      { op: 'refund', cost: 1, target: 1_700_000_000_123 },
      { op: 'take', cost: 4, target: 1 },
      { op: 'settle', cost: undefined, target: 5 },
    ],
  );
});
