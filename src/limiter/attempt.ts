import { StoreError, StoreTimeoutError, toStoreError } from '../core/errors.js';
import type { Decision, FailureReason, LimitOptions, Limiter, Operation, Policy } from '../core/types.js';
import { policyDecision } from '../core/binding.js';
import { decisionReplyLength } from '../engine/reply.js';
import type { Arg, Reply, Script } from '../engine/script.js';
import type { Store } from '../engine/store.js';
import { promiseFor, type Settlers } from '../engine/promise-settlers.js';
import { TIMER_SLACK_MS, type Deadlines, type Pending } from '../core/deadlines.js';
import { decisionOf } from './decision.js';
import { DENY_RETRY_AFTER_MS, type StoreErrorPolicy } from './failure-options.js';

/** What a limit or peek answers: made from its decision, and the store's reply when the store decided. */
export type Answer<T> = (decision: Decision, reply: Reply | undefined) => T;

/** The limiter method a decision answers, which a fallback limiter is asked in its place. */
export type DecidingMethod = 'limit' | 'acquire' | 'peek';

/** What a guard's attempts share: its store and deadlines, its failure policy, and how it reports an outage and a recovery. */
export interface Outages {
  readonly store: Store;
  readonly deadlines: Deadlines;
  /** Why the store cannot reach its server, if it can tell (Store.unreachable). */
  readonly unreachable: (() => StoreError | undefined) | undefined;
  readonly onStoreError: StoreErrorPolicy;
  recovered(): void;
  failed(operation: Operation, reason: FailureReason, error: StoreError): void;
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

/**
 * A store call run by the guard, which reports, once, its value or why it failed: an error, or no
 * reply within the timeout. A reply after the timeout is ignored, and a late rejection is handled,
 * never unhandled; the call is told the timeout, so that it counts nothing if it runs after it.
 * One object per call holds its deadline, its promise's settlers and its handlers of the store's
 * answer (no closures per call; see bench/NOTES.md, "In process").
 */
export abstract class Attempt<T> implements Pending, Settlers<T> {
  due = 0;
  done = false;
  timer?: ReturnType<typeof setTimeout>;
  resolve!: (answer: T) => void;
  reject!: (error: unknown) => void;

  constructor(
    protected readonly outages: Outages,
    private readonly operation: Operation,
  ) {}

  /** Answers with the store's reply; throws only when the reply cannot be read (see replied). */
  protected abstract succeed(reply: Reply): void;
  protected abstract fail(reason: FailureReason, error: StoreError): void;

  /** Runs the store call; the answer is what it settles to. */
  run(script: Script, keys: readonly string[], args: readonly Arg[]): Promise<T> {
    const answered = promiseFor(this);
    this.outages.deadlines.add(this);
    let answer: Promise<Reply>;
    try {
      // The instant the guard may first answer by the timeout, as the guard read it: the store may
      // count the call only before it.
      answer = this.outages.store.run(script, keys, args, this.due - TIMER_SLACK_MS);
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

  private readonly replied = (reply: Reply): void => {
    if (!this.outages.deadlines.finish(this)) return;
    try {
      this.succeed(reply);
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

/** A store call with no decision to fall back on: its reply, or its StoreError. */
export class Settling extends Attempt<Reply> {
  protected succeed(reply: Reply): void {
    this.resolve(reply);
  }

  protected fail(_reason: FailureReason, error: StoreError): void {
    this.reject(error);
  }
}

/** What a fallback limiter answers in the store's place: the same method, key and cost. */
function askFallback(fallback: Limiter, method: DecidingMethod, key: string, cost: LimitOptions['cost']) {
  if (method === 'peek') return fallback.peek(key);
  return method === 'acquire' ? fallback.acquire(key, { cost }) : fallback.limit(key, { cost });
}

/** A limit or peek: its answer, from the store's decision, or from `onStoreError` when the store fails. */
export class Deciding<T> extends Attempt<T> {
  constructor(
    outages: Outages,
    private readonly method: DecidingMethod,
    private readonly policies: readonly Policy[],
    private readonly answer: Answer<T>,
    private readonly key: string,
    private readonly cost: LimitOptions['cost'],
  ) {
    super(outages, method === 'peek' ? 'peek' : 'limit');
  }

  protected succeed(reply: Reply): void {
    // A custom store's reply too short for the policies would read as a denial without a retryAfterMs.
    const needed = decisionReplyLength(this.policies.length);
    if (!(reply.length >= needed))
      throw new TypeError(`the store's reply holds ${reply.length} numbers, not the ${needed} a decision needs`);
    this.answerWith(decisionOf(reply, this.policies), reply);
  }

  protected fail(reason: FailureReason, error: StoreError): void {
    const { onStoreError } = this.outages;
    if (onStoreError === 'allow' || onStoreError === 'deny')
      this.answerWith(withoutStore(this.policies, onStoreError === 'allow', reason, error), undefined);
    else
      // A fallback that throws, or answers no promise, is one that failed, not a call left unanswered.
      new Promise<Decision>((decided) => decided(askFallback(onStoreError, this.method, this.key, this.cost))).then(
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
