import { parseDuration, type Duration } from '../core/duration.js';
import {
  InvalidArgumentError,
  InvalidOptionError,
  StoreError,
  StoreTimeoutError,
  toStoreError,
} from '../core/errors.js';
import { MAX_TIMER_MS, afterThisTurn, callHook, holdProcessOpen, timersOutliveRequests, warn } from '../core/host.js';
import type { Decision, FailureReason, Limiter, Operation, Policy, StoreWatcher } from '../core/types.js';
import { policyDecision } from '../core/binding.js';
import { isEnginePolicy, type EnginePolicy } from '../engine/algorithm.js';
import { decisionReplyLength } from '../engine/reply.js';
import type { Reply } from '../engine/script.js';
import { promiseFor, type Settlers } from '../core/settlers.js';

/**
 * What a limiter answers when its store fails or does not reply within `timeout`:
 * - 'allow': admit the request (fail open), the default;
 * - 'deny': refuse it (fail closed), with a retryAfterMs of DENY_RETRY_AFTER_MS;
 * - a limiter, e.g. one on memoryStore() with a stricter policy: ask it instead.
 * Either way the decision carries `reason` and `error`, so failing open is never silent.
 */
export type StoreErrorPolicy = 'allow' | 'deny' | Limiter;

export interface FailureOptions extends StoreWatcher {
  /** The longest a call waits for the store before following `onStoreError` (default '1s'). */
  timeout?: Duration;
  /** What to answer when the store fails or times out (default 'allow'). */
  onStoreError?: StoreErrorPolicy;
}

// Long enough that a healthy Redis behind a busy event loop never trips it; short enough that a
// request never hangs for the seconds a client spends reconnecting. Latency-sensitive paths set less.
export const DEFAULT_TIMEOUT_MS = 1_000;
// A denial must say when to come back; the store cannot tell, so: soon, but not in a tight loop.
export const DENY_RETRY_AFTER_MS = 1_000;
// Node runs timers by a clock of whole ms, so one may fire up to 1 ms before performance.now()
// reaches its time. A call due that soon is answered then: waiting for the sliver would cost
// another turn of the event loop, tens of ms under load. So a store call may count only until
// this long before its deadline (see attempt), never after the guard may have answered it.
const TIMER_SLACK_MS = 1;

function isLimiter(value: unknown): value is Limiter {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Limiter).limit === 'function' &&
    typeof (value as Limiter).peek === 'function'
  );
}

export function storeErrorPolicy(value: unknown, own: readonly EnginePolicy[]): StoreErrorPolicy {
  if (value === undefined) return 'allow';
  if (value === 'allow' || value === 'deny') return value;
  if (!isLimiter(value))
    throw new InvalidOptionError('onStoreError', value, "'allow', 'deny' or a fallback limiter from createLimiter()");
  if (Array.isArray(value.policies) && value.policies.every(isEnginePolicy)) fitsAsFallback(value, own);
  return value;
}

/**
 * A fallback is asked only while the store fails, with the call's own cost by unit and method: a
 * call it could not take (a unit it does not count, a lease it cannot lend, a slot it only lends
 * by lease) would fail then, in an outage, so such a fallback is refused now.
 */
function fitsAsFallback(fallback: Limiter, own: readonly EnginePolicy[]): void {
  const theirs = fallback.policies as readonly EnginePolicy[];
  const counted = new Set(theirs.map((p) => p.counts));
  const missing = [...new Set(own.map((p) => p.counts))].filter((unit) => !counted.has(unit));
  if (missing.length > 0)
    throw new InvalidOptionError(
      'onStoreError',
      fallback,
      `a fallback limiter counting every unit this limiter counts; it does not count ${missing.join(', ')}`,
    );
  const leases = (policies: readonly EnginePolicy[]) => policies.some((p) => p.kind.leases === true);
  if (leases(own) !== leases(theirs))
    throw new InvalidOptionError(
      'onStoreError',
      fallback,
      leases(own)
        ? 'a fallback limiter with a concurrency policy, to lend the leases acquire() asks for'
        : 'a fallback limiter without a concurrency policy: limit() cannot take its slots',
    );
}

/** A watcher's callbacks, checked; `Invalid` names a bad one as an option or as an argument. */
function storeWatcher(
  value: object,
  Invalid: typeof InvalidOptionError | typeof InvalidArgumentError,
  path = '',
): StoreWatcher {
  const watcher = value as Record<string, unknown>;
  for (const name of ['onOutage', 'onRecovery'] as const) {
    if (watcher[name] !== undefined && typeof watcher[name] !== 'function')
      throw new Invalid(`${path}${name}`, watcher[name], 'a function');
  }
  return watcher;
}

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
   * Answers calls whose deadline passed, by their timeout, unless their reply is read first. Node
   * runs due timers before it reads the sockets that became readable while the event loop was busy
   * (in a request's handler, say): a reply that Redis sent in time may be waiting there, from a
   * call Redis counted. Answered by the timeout, that call would be counted and answered by the
   * failure policy both. So the timeout waits for the end of the turn, after the event loop has
   * read every socket ready now, and a reply already here wins.
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

/**
 * A store call, told until when (a performance.now() time) it may take effect: after that its
 * caller may have moved on.
 */
export type StoreCall<T> = (deadline: number) => Promise<T>;

/** What a limit or peek answers: made from its decision, and the store's reply when the store decided. */
export type Answer<T> = (decision: Decision, reply: Reply | undefined) => T;

export interface FailureGuard {
  /**
   * Asks the store within the timeout and answers with its reply, read as a decision; if the store
   * fails, answers by `onStoreError`, saying why.
   */
  decide<T>(
    operation: 'limit' | 'peek',
    policies: readonly Policy[],
    call: StoreCall<Reply>,
    answer: Answer<T>,
    askFallback: (fallback: Limiter) => Promise<Decision>,
  ): Promise<T>;
  /** Runs a store call that has no decision to fall back on (reset): within the timeout, or a StoreError. */
  settle<T>(operation: Operation, call: StoreCall<T>): Promise<T>;
  /** Adds a watcher of this guard's outages besides the limiter's own `onOutage` and `onRecovery`. */
  watch(watcher: StoreWatcher): void;
}

/** A decision made without the store: every policy admits (fail open) or denies (fail closed) alike. */
function withoutStore(
  policies: readonly Policy[],
  allowed: boolean,
  reason: FailureReason,
  error: StoreError,
): Decision {
  const waitMs = allowed ? 0 : DENY_RETRY_AFTER_MS;
  const parts = policies.map((p) => policyDecision(p, allowed, allowed ? p.limit : 0, waitMs, waitMs));
  const first = parts[0];
  return {
    allowed,
    limit: first?.limit ?? 0,
    remaining: first?.remaining ?? 0,
    resetAfterMs: waitMs,
    retryAfterMs: waitMs,
    policies: parts,
    reason,
    error,
  };
}

/** A store's reply to a limit or peek, read as the decision of its policies. */
export type ReplyReader = (reply: Reply, policies: readonly Policy[]) => Decision;

/**
 * What a guard's attempts share: its deadlines, how it reports an outage and a recovery, how it
 * reads a reply and what it answers without one.
 */
interface Outages {
  readonly deadlines: Deadlines;
  /** Why the store cannot reach its server, if it can tell (Store.unreachable). */
  readonly unreachable: (() => StoreError | undefined) | undefined;
  readonly read: ReplyReader;
  readonly onStoreError: StoreErrorPolicy;
  recovered(): void;
  failed(operation: Operation, reason: FailureReason, error: StoreError): void;
}

/**
 * A store call run by the guard, which reports, once, its value or why it failed: an error, or no
 * reply within the timeout. A reply after the timeout is ignored, and a late rejection is handled,
 * never unhandled; the call is told the timeout, so that it counts nothing if it runs after it.
 * One object per call holds its deadline, its promise's settlers and its two handlers of the
 * store's answer, where the guard made an executor, a failure callback, a timeout closure and a
 * queue entry.
 */
abstract class Attempt<V, T> implements Pending, Settlers<T> {
  due = 0;
  done = false;
  timer?: ReturnType<typeof setTimeout>;
  resolve!: (answer: T) => void;
  reject!: (error: unknown) => void;

  constructor(
    protected readonly outages: Outages,
    private readonly operation: Operation,
  ) {}

  /** Answers with the store's value; throws only when the value cannot be read (see replied). */
  protected abstract succeed(value: V): void;
  protected abstract fail(reason: FailureReason, error: StoreError): void;

  /** Runs the store call; the answer is what it settles to. */
  run(call: StoreCall<V>): Promise<T> {
    const answered = promiseFor(this);
    this.outages.deadlines.add(this);
    let answer: Promise<V>;
    try {
      // The instant the guard may first answer by the timeout, as the guard read it: the store may
      // count the call only before it.
      answer = call(this.due - TIMER_SLACK_MS);
      // A custom store's run() that answers no promise fails the call, as one that throws does.
      if (typeof answer?.then !== 'function')
        throw new TypeError(`the store answered ${answer === null ? 'null' : typeof answer}, not a promise`);
    } catch (error) {
      answer = Promise.reject(error);
    }
    answer.then(this.replied, this.refused);
    return answered;
  }

  timedOut(): void {
    // A store that knows why no reply came (a refused connection) fails with that, not the wait.
    const down = unreachable(this.outages);
    if (down) this.failWith('store-error', down);
    else this.failWith('timeout', new StoreTimeoutError(`no reply within ${this.outages.deadlines.ms} ms`));
  }

  private readonly replied = (value: V): void => {
    if (!this.outages.deadlines.finish(this)) return;
    try {
      this.succeed(value);
    } catch (unreadable) {
      // A reply no decision can be read from (a broken store's) is the store's failure, answered
      // as one: thrown from this handler, it would be an unhandled rejection and the call would
      // never be answered.
      this.failWith('store-error', toStoreError(unreadable));
      return;
    }
    this.outages.recovered();
  };

  private readonly refused = (raw: unknown): void => {
    if (!this.outages.deadlines.finish(this)) return;
    const error = toStoreError(raw);
    this.failWith(error instanceof StoreTimeoutError ? 'timeout' : 'store-error', error);
  };

  private failWith(reason: FailureReason, error: StoreError): void {
    this.outages.failed(this.operation, reason, error);
    this.fail(reason, error);
  }
}

/** Why the guard's store cannot reach its server; undefined when it cannot tell, or breaks its contract. */
function unreachable({ unreachable }: Outages): StoreError | undefined {
  try {
    const down = unreachable?.();
    return down instanceof StoreError ? down : undefined;
  } catch {
    return undefined;
  }
}

/** A store call with no decision to fall back on: its value, or its StoreError. */
class Settling<T> extends Attempt<T, T> {
  protected succeed(value: T): void {
    this.resolve(value);
  }

  protected fail(_reason: FailureReason, error: StoreError): void {
    this.reject(error);
  }
}

/** A limit or peek: its answer, from the store's decision, or from `onStoreError` when the store fails. */
class Deciding<T> extends Attempt<Reply, T> {
  constructor(
    outages: Outages,
    operation: 'limit' | 'peek',
    private readonly policies: readonly Policy[],
    private readonly answer: Answer<T>,
    private readonly askFallback: (fallback: Limiter) => Promise<Decision>,
  ) {
    super(outages, operation);
  }

  protected succeed(reply: Reply): void {
    // A custom store's reply too short for the policies would read as a denial without a retryAfterMs.
    const needed = decisionReplyLength(this.policies.length);
    if (!(reply.length >= needed))
      throw new TypeError(`the store's reply holds ${reply.length} numbers, not the ${needed} a decision needs`);
    this.answerWith(this.outages.read(reply, this.policies), reply);
  }

  protected fail(reason: FailureReason, error: StoreError): void {
    const { onStoreError } = this.outages;
    if (onStoreError === 'allow' || onStoreError === 'deny')
      this.answerWith(withoutStore(this.policies, onStoreError === 'allow', reason, error), undefined);
    else
      // A fallback that throws, or answers no promise, is one that failed, not a call left unanswered.
      new Promise<Decision>((decided) => decided(this.askFallback(onStoreError))).then(
        (decision) => this.answerWith({ ...decision, reason, error }, undefined),
        this.reject,
      );
  }

  // An answer that throws rejects the call, as an error in any step after the store's does.
  private answerWith(decision: Decision, reply: Reply | undefined): void {
    try {
      this.resolve(this.answer(decision, reply));
    } catch (error) {
      this.reject(error);
    }
  }
}

/**
 * Reads `timeout`, `onStoreError`, `onOutage` and `onRecovery` from the options of a limiter of
 * `policies`, whose store's replies to a limit or peek `read` makes decisions of, and whose store
 * may say why it is `unreachable`.
 */
export function failureGuard(
  options: Record<string, unknown>,
  policies: readonly EnginePolicy[],
  read: ReplyReader,
  unreachable?: () => StoreError | undefined,
): FailureGuard {
  const timeoutMs = options.timeout === undefined ? DEFAULT_TIMEOUT_MS : parseDuration('timeout', options.timeout);
  if (timeoutMs > MAX_TIMER_MS)
    throw new InvalidOptionError(
      'timeout',
      options.timeout,
      `a duration of at most ${MAX_TIMER_MS} ms (about 24.8 days), the longest a timer waits`,
    );
  const onStoreError = storeErrorPolicy(options.onStoreError, policies);
  const own = storeWatcher(options, InvalidOptionError);
  const watchers: StoreWatcher[] = [own];
  let outage: { since: number; failures: number } | undefined;

  const outages: Outages = {
    deadlines: new Deadlines(timeoutMs),
    unreachable,
    read,
    onStoreError,
    recovered() {
      if (!outage) return;
      const { since, failures } = outage;
      outage = undefined;
      const recovery = { failures, downForMs: Date.now() - since };
      for (const watcher of watchers) callHook('onRecovery', watcher.onRecovery, () => recovery, watcher);
    },
    failed(operation, reason, error) {
      outage ??= { since: Date.now(), failures: 0 };
      outage.failures++;
      const failure = { operation, reason, error, failures: outage.failures };
      for (const watcher of watchers) callHook('onOutage', watcher.onOutage, () => failure, watcher);
      // Told to no one who reads it, an outage still reaches the logs: once, when it begins.
      if (!own.onOutage && outage.failures === 1) {
        const policy = typeof onStoreError === 'string' ? `'${onStoreError}'` : 'the fallback limiter';
        warn(`${error.message} (${reason}); answering ${policy} until it recovers`, { code: 'SLUICE_STORE_FAILED' });
      }
    },
  };

  return {
    decide(operation, policies, call, answer, askFallback) {
      return new Deciding(outages, operation, policies, answer, askFallback).run(call);
    },
    settle<T>(operation: Operation, call: StoreCall<T>) {
      return new Settling<T>(outages, operation).run(call);
    },
    watch(watcher) {
      if (typeof watcher !== 'object' || watcher === null)
        throw new InvalidArgumentError('watcher', watcher, 'an object with onOutage and/or onRecovery functions');
      // Kept as given, so its callbacks are called as its methods (a class instance keeps its this).
      watchers.push(storeWatcher(watcher, InvalidArgumentError, 'watcher.'));
    },
  };
}
