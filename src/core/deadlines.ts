import { afterThisTurn, holdProcessOpen, timersOutliveRequests } from './host.js';

// Node runs timers by a clock of whole ms, so one may fire up to 1 ms before performance.now()
// reaches its time. A call due that soon is answered then rather than a turn of the event loop
// later, so a store call may count only until this long before its deadline (see Attempt.run).
export const TIMER_SLACK_MS = 1;

/** A call waiting for its answer or its deadline, whichever comes first. */
export interface Pending {
  /** When it is due (a performance.now() time), set by Deadlines.add. */
  due: number;
  done: boolean;
  /** Its own timer, where timers die with their request (see timersOutliveRequests). */
  timer?: ReturnType<typeof setTimeout>;
  /** Answers it by its timeout. */
  timedOut(): void;
}

/**
 * The deadlines of calls that all wait `ms` (one guard's store calls; sluice serve's gRPC calls of
 * one grpc-timeout), so they fall due in the order they were set: one timer, armed for the
 * earliest, serves them all, instead of a timer per call. It fires when that call is due, as a
 * timer of its own would, and lapses when nothing waits.
 */
export class Deadlines {
  // From `head` on, the calls not known to be answered, in the order they fall due.
  private queue: (Pending | undefined)[] = [];
  private head = 0;
  private waiting = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(readonly ms: number) {}

  /** Sets when `pending` is due, and answers it by its timeout then unless it is finished first. */
  add(pending: Pending): void {
    // Read once: the call is told this same instant (see Attempt), so nothing that runs between
    // arming the guard and asking the store (a first call's script build, a GC pause) can leave the
    // store a later deadline than the guard's.
    pending.due = performance.now() + this.ms;
    if (!timersOutliveRequests) {
      // A Worker drops a timer when the request that armed it ends: each call arms its own, in its
      // own request, the one kind of timer that serves it there.
      pending.timer = setTimeout(() => this.expire([pending]), this.ms);
      return;
    }
    if (this.waiting === 0) {
      this.queue = [];
      this.head = 0;
      // Calls that settle at once (the memory store) would arm and clear a timer each: one timer
      // stays armed instead, holding the process open only while a call waits.
      holdProcessOpen(this.timer, true);
    }
    this.queue.push(pending);
    this.waiting++;
    this.timer ??= setTimeout(this.fire, this.ms);
  }

  /** Marks a call answered; false if it already was (by its reply, or by its timeout). */
  finish(pending: Pending): boolean {
    if (pending.done) return false;
    pending.done = true;
    if (pending.timer !== undefined) clearTimeout(pending.timer);
    else {
      if (--this.waiting === 0) holdProcessOpen(this.timer, false);
      this.dropAnswered();
    }
    return true;
  }

  /**
   * Drops the answered calls at the front of the queue, and copies the queue down once they made up
   * most of it. Calls are answered about in the order they were made, so the queue holds little
   * more than the calls waiting. Held until the timer next fired, up to `ms` later, every call (and
   * all it refers to) outlived the young generation's collections and was copied into the old one.
   */
  private dropAnswered(): void {
    const { queue } = this;
    while (this.head < queue.length && (queue[this.head] as Pending).done) queue[this.head++] = undefined;
    if (this.head > 1024 && this.head * 2 > queue.length) {
      this.queue = queue.slice(this.head);
      this.head = 0;
    }
  }

  /**
   * Answers calls whose deadline passed by their timeout at the end of this turn, so that a reply
   * already waiting in a socket (Node runs timers before it reads them) wins: else a call Redis
   * counted would also be answered by the failure policy.
   */
  private expire(due: readonly Pending[]): void {
    afterThisTurn(() => {
      for (const pending of due) if (this.finish(pending)) pending.timedOut();
    });
  }

  private readonly fire = (): void => {
    this.timer = undefined;
    const now = performance.now();
    const due: Pending[] = [];
    for (; this.head < this.queue.length; this.head++) {
      const pending = this.queue[this.head] as Pending;
      if (!pending.done) {
        if (pending.due > now + TIMER_SLACK_MS) break;
        due.push(pending);
      }
      // Passed, answered or due, a call is no longer the queue's to hold.
      this.queue[this.head] = undefined;
    }
    this.dropAnswered();
    const next = this.queue[this.head];
    if (next) this.timer = setTimeout(this.fire, Math.max(1, Math.ceil(next.due - now)));
    else {
      this.queue = [];
      this.head = 0;
    }
    if (due.length > 0) this.expire(due);
  };
}
