import type { Store } from '../src/index.js';
import { replyNowMs } from '../src/engine/reply.js';
import type { Timed } from './history.js';
import { TIMEOUT_MS } from './plan.js';

/** This process's clock in ms since the epoch, finer than Date.now(). */
export const clock = () => performance.timeOrigin + performance.now();

/**
 * The store, telling a listener the Redis time of each reply (read as the limiter reads it, by
 * the driver's own accessor: its place in the reply is the driver's business). A limiter asks its
 * store in the same synchronous step as limit(), acquire() or release(), so the listener set
 * around that call hears about that call's reply.
 */
export function timeTelling(store: Store) {
  let listener: ((serverMs: number) => void) | undefined;
  const told: Store = {
    run(script, keys, args, validForMs) {
      const heard = listener;
      return store.run(script, keys, args, validForMs).then((reply) => {
        heard?.(replyNowMs(reply));
        return reply;
      });
    },
  };
  return {
    store: told,
    /**
     * Runs `call`, timed, with the server time of the store step it starts, beside a timer set for
     * the limiter's timeout + 1 ms: when it fires, the limiter's own deadline has fired too. (Node
     * runs timers by a clock of whole ms, so a timer may fire a fraction of a ms before its time by
     * performance.now(); the limiter then finds the call not yet due and waits 1 ms more for it.)
     */
    timed: async <T>(call: () => Promise<T>): Promise<Timed & { value?: T; error?: unknown; serverMs?: number }> => {
      let serverMs: number | undefined;
      let firedMs: number | undefined;
      listener = (ms) => (serverMs = ms);
      const startMs = clock();
      const timer = setTimeout(() => (firedMs = clock()), TIMEOUT_MS + 1);
      let pending: Promise<T>;
      try {
        pending = call();
      } finally {
        listener = undefined;
      }
      const outcome: { value?: T; error?: unknown } = await pending.then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      );
      const endMs = clock();
      clearTimeout(timer);
      const deadline =
        firedMs === undefined ? {} : { timerLateMs: firedMs - startMs - TIMEOUT_MS - 1, afterTimerMs: endMs - firedMs };
      return { startMs, endMs, ...deadline, ...outcome, ...(outcome.error === undefined && { serverMs }) };
    },
  };
}
