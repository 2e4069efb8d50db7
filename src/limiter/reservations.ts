import { clientId } from '../core/keys.js';
import type { Decision, Reservation } from '../core/types.js';
import type { EnginePolicy } from '../engine/algorithm.js';
import { replyAllowed, replyNowMs } from '../engine/reply.js';
import type { Reply } from '../engine/script.js';
import { costOf, promised, validAmount, type Costs } from './call-arguments.js';
import type { DeniedCache } from './denied-cache.js';
import type { StoreCalls } from './store-calls.js';

/** settle() of a reservation: corrects the charge from `estimate` to what is `actual`, once. */
function settler(
  calls: StoreCalls,
  denied: DeniedCache | undefined,
  key: string,
  reply: Reply | undefined,
  list: readonly EnginePolicy[],
  estimate: Costs,
): (actual: unknown) => Promise<boolean> {
  // Charged only if the store counted it: not when denied (a shadowed denial included), answered
  // from the denied-key cache, or decided by onStoreError.
  let settled: Promise<boolean> | undefined =
    reply !== undefined && replyAllowed(reply) ? undefined : Promise.resolve(false);
  // Read now: a local store reuses its reply for its next call.
  const chargedAt = reply === undefined ? 0 : replyNowMs(reply);
  // Whether a settle failed: it may have run (its reply lost with its connection, or later than its
  // timeout on a starved machine), so a retry gives nothing back again (a give-back twice would admit
  // past the limit); an increase it may charge twice (docs/algorithms.md, "Budgets").
  let mayHaveRun = false;
  return (actual) =>
    promised(() => {
      const actualCosts = validAmount('actual', actual, list, true);
      if (settled) return settled.then(() => false);
      const deltas = list.map((_, i) => {
        const delta = costOf(actualCosts, i) - costOf(estimate, i);
        return mayHaveRun && delta < 0 ? 0 : delta;
      });
      denied?.forget(key);
      // Given back where the estimate was charged, at the reply's time (the store's clock).
      const settling = deltas.every((d) => d === 0)
        ? Promise.resolve(true)
        : calls.change(clientId(key), list, 'settle', deltas, chargedAt).then(() => true);
      settled = settling.catch((error: unknown) => {
        mayHaveRun = true;
        settled = undefined;
        throw error;
      });
      return settled;
    });
}

/** A reservation: the decision, with settle() and cancel() of what it charged. */
export function reservationOf(
  calls: StoreCalls,
  denied: DeniedCache | undefined,
  key: string,
  decision: Decision,
  reply: Reply | undefined,
  list: readonly EnginePolicy[],
  cost: Costs,
): Reservation {
  const settle = settler(calls, denied, key, reply, list, cost);
  return { ...decision, settle, cancel: () => settle(0) };
}
