import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  CostExceedsLimitError,
  InvalidArgumentError,
  InvalidOptionError,
  createJointLimiter,
  createLimiter,
  type JointPart,
} from '../../src/index.js';
import { hashSlot } from '../../src/stores/slot.js';
import { algorithms } from '../support/algorithms.js';
import { uniquePrefix, useRedis } from '../support/redis.js';

const HOUR = 3_600_000;
const harness = useRedis({ cluster: true });

// Two client keys whose state shares one Redis Cluster slot, found once: a joint call on a cluster
// takes only such keys.
const [sameSlotA, sameSlotB] = ((): [string, string] => {
  const seen = new Map<number, string>();
  for (let i = 0; ; i++) {
    const key = `client-${i}`;
    const slot = hashSlot(`{${key}}`);
    const other = seen.get(slot);
    if (other !== undefined) return [other, key];
    seen.set(slot, key);
  }
})();

for (const storeCase of harness.cases) {
  describe(`joint decisions: ${storeCase.name}`, () => {
    for (const algorithm of algorithms) {
      it(`${algorithm.name}: admits only what every part admits, and counts a denial in none`, async () => {
        const store = storeCase.store();
        const prefix = uniquePrefix();
        const joint = createJointLimiter({ store, prefix, timeout: '1m' });
        const wide = algorithm.policy(5, HOUR);
        const narrow = algorithm.policy(2, HOUR);
        const parts: JointPart[] = [
          { key: sameSlotA, policies: [wide], cost: 1 },
          { key: sameSlotB, policies: [narrow], cost: 1 },
        ];
        assert.equal(joint.canDecide(parts), true);
        const answers = [];
        for (let i = 0; i < 4; i++) answers.push(await joint.limit(parts));
        assert.deepEqual(
          answers.map((a) => a.allowed),
          [true, true, false, false],
        );
        const [, , denied] = answers;
        assert.deepEqual(
          denied?.parts.map((policies) => policies.map((p) => p.allowed)),
          [[true], [false]],
        );
        // The state is the parts' limiters' own: the wide key spent 2 of 5, the narrow one 2 of 2.
        const wideAlone = createLimiter({ store, prefix, policy: wide, timeout: '1m' });
        assert.equal((await wideAlone.peek(sameSlotA)).remaining, 3);
        const narrowAlone = createLimiter({ store, prefix, policy: narrow, timeout: '1m' });
        assert.equal((await narrowAlone.peek(sameSlotB)).allowed, false);
        // A peek counts nothing either way.
        const peeked = await joint.peek([{ key: sameSlotA, policies: [wide], cost: 3 }]);
        assert.equal(peeked.allowed, true);
        assert.equal((await wideAlone.peek(sameSlotA)).remaining, 3);
      });
    }

    it('takes each part its own cost', async () => {
      const joint = createJointLimiter({ store: storeCase.store(), prefix: uniquePrefix(), timeout: '1m' });
      const policy = algorithms[0]?.policy(5, HOUR);
      assert.ok(policy);
      const decided = await joint.limit([
        { key: sameSlotA, policies: [policy], cost: 2 },
        { key: sameSlotB, policies: [policy], cost: 4 },
      ]);
      assert.deepEqual(
        decided.parts.map(([p]) => p?.remaining),
        [3, 1],
      );
      const next = await joint.limit([
        { key: sameSlotA, policies: [policy], cost: 1 },
        { key: sameSlotB, policies: [policy], cost: 2 },
      ]);
      assert.equal(next.allowed, false);
      assert.deepEqual(
        next.parts.map(([p]) => p?.allowed),
        [true, false],
      );
      // A part that names no cost costs 1.
      const defaulted = await joint.limit([{ key: sameSlotA, policies: [policy] }]);
      assert.equal(defaulted.parts[0]?.[0]?.remaining, 2);
    });

    it(
      storeCase.name.includes('cluster')
        ? 'cannot decide keys of several slots together'
        : 'decides keys of any clients together',
      () => {
        const joint = createJointLimiter({ store: storeCase.store(), prefix: uniquePrefix() });
        const policy = algorithms[0]?.policy(5, HOUR);
        assert.ok(policy);
        // 'a' and 'b' hash to different slots.
        assert.notEqual(hashSlot('{a}'), hashSlot('{b}'));
        const parts = [
          { key: 'a', policies: [policy], cost: 1 },
          { key: 'b', policies: [policy], cost: 1 },
        ];
        assert.equal(joint.canDecide(parts), !storeCase.name.includes('cluster'));
      },
    );
  });
}

describe('joint decisions: bad input', () => {
  it('is refused with a typed error naming it, before anything is counted', async () => {
    const store = harness.cases[0]?.store();
    assert.ok(store);
    const policy = algorithms[0]?.policy(2, HOUR);
    assert.ok(policy);
    const joint = createJointLimiter({ store, prefix: uniquePrefix() });
    await assert.rejects(joint.limit([]), InvalidArgumentError);
    await assert.rejects(joint.limit([{ key: '', policies: [policy], cost: 1 }]), InvalidArgumentError);
    await assert.rejects(joint.limit([{ key: 'k', policies: [], cost: 1 }]), InvalidArgumentError);
    await assert.rejects(joint.limit([{ key: 'k', policies: [policy], cost: 0 }]), InvalidArgumentError);
    await assert.rejects(
      joint.limit([
        { key: 'k', policies: [policy], cost: 1 },
        { key: 'l', policies: [policy], cost: 3 },
      ]),
      CostExceedsLimitError,
    );
    assert.equal((await joint.limit([{ key: 'k', policies: [policy], cost: 2 }])).allowed, true);
    const fallback = createLimiter({ store, policy });
    assert.throws(
      () => createJointLimiter({ store, onStoreError: fallback as unknown as 'allow' }),
      InvalidOptionError,
    );
    assert.throws(() => createJointLimiter({ store, onStoreError: 'open' as 'allow' }), {
      name: 'InvalidOptionError',
      message: `sluice: option "onStoreError" must be 'allow' or 'deny': a fallback limiter decides one key; got "open"`,
    });
    assert.throws(() => createJointLimiter({ store, penalty: {} } as never), {
      name: 'InvalidOptionError',
      message: /createJointLimiter.*penalty/,
    });
    assert.throws(() => createJointLimiter({ store: {} as never }), { name: 'InvalidOptionError', message: /store/ });
    await assert.rejects(joint.limit([null as never]), InvalidArgumentError);
  });
});
