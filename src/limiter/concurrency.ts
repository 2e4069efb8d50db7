import { parseDuration, type Duration } from '../core/duration.js';
import { InvalidArgumentError } from '../core/errors.js';
import { clientId } from '../core/keys.js';
import type { Decision, Lease, Operation, Policy } from '../core/types.js';
import type { EnginePolicy } from '../engine/algorithm.js';
import { scriptArgs, scriptFor } from '../engine/driver.js';
import { policyLeaseId, replyAllowed } from '../engine/reply.js';
import type { Reply } from '../engine/script.js';
import { costOf, type Costs } from './call-arguments.js';
import type { StoreCalls } from './store-calls.js';

/** Whether `list` holds a concurrency policy, whose slots acquire() takes and a lease gives back. */
export function leasing(list: readonly EnginePolicy[]): boolean {
  return list.some((p) => p.kind.leases === true);
}

/** A lease's release() and extend(): on each concurrency policy that gave a slot. */
export function leaseOf(
  calls: StoreCalls,
  key: string,
  decision: Decision,
  reply: Reply | undefined,
  list: readonly EnginePolicy[],
  cost: Costs,
): Lease {
  // Without the store's reply, the decision came from onStoreError: a fallback limiter's lease
  // is its own to release, and 'allow' or 'deny' took no slot.
  if (reply === undefined && 'release' in decision) return decision as Lease;
  const keys = calls.keysOf(clientId(key), list);
  const first = calls.withStrikes ? 2 : 1;
  const held = list.flatMap((policy, i) => {
    const leaseId = reply === undefined ? 0 : policyLeaseId(reply, i);
    return policy.kind.leases === true && leaseId > 0
      ? [{ policy, leaseId, slots: costOf(cost, i), keys: [...keys.slice(0, first), keys[first + i] as string] }]
      : [];
  });
  const onEach = async (op: Operation, msFor: (policy: Policy) => number) => {
    const replies = await Promise.all(
      held.map(({ policy, leaseId, slots, keys }) =>
        calls.guard.settle(
          op,
          scriptFor([policy.kind]),
          keys,
          scriptArgs({
            op,
            cost: slots,
            target: leaseId,
            ms: msFor(policy),
            penalty: calls.penalty,
            policies: [policy],
          }),
        ),
      ),
    );
    return replies.some(replyAllowed);
  };
  return {
    ...decision,
    release: () => onEach('release', () => 0),
    async extend(ms?: Duration) {
      const extendMs = ms === undefined ? undefined : parseDuration('ms', ms, 1, InvalidArgumentError);
      return onEach('extend', (policy) => extendMs ?? policy.windowMs);
    },
  };
}
