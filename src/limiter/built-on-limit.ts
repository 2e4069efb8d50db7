import { parseDuration } from '../core/duration.js';
import { InvalidArgumentError } from '../core/errors.js';
import { MAX_TIMER_MS } from '../core/host.js';
import { validKey } from '../core/keys.js';
import type { Decision, LimitOptions, Limiter, WaitOptions } from '../core/types.js';
import { callOptions } from './call-arguments.js';

/**
 * limitMany through a limiter's `limit` (its own, or an observed one): every key is checked before
 * anything is sent, so a bad key counts nothing; the rest are asked at once (one batch in Redis).
 */
export async function limitEach(
  limit: Limiter['limit'],
  keys: unknown,
  limitOptions?: LimitOptions,
): Promise<Decision[]> {
  if (!Array.isArray(keys)) throw new InvalidArgumentError('keys', keys, 'an array of keys');
  keys.forEach(validKey);
  return Promise.all(keys.map((key: string) => limit(key, limitOptions)));
}

/** waitFor through a limiter's `limit` (its own, or an observed one, which then sees every attempt). */
export async function waitThrough(limit: Limiter['limit'], key: string, waitOptions?: WaitOptions): Promise<Decision> {
  const { timeout, signal, ...limitOptions } = callOptions(waitOptions);
  const timeoutMs = timeout === undefined ? Infinity : parseDuration('timeout', timeout, 1, InvalidArgumentError);
  if (signal !== undefined && !(signal instanceof AbortSignal))
    throw new InvalidArgumentError('signal', signal, 'an AbortSignal');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    signal?.throwIfAborted();
    const decision = await limit(key, limitOptions);
    if (decision.allowed || Date.now() + decision.retryAfterMs > deadline) return decision;
    // Past the longest a timer waits, it asks again then: one call in 24.8 days, not one a ms.
    await sleep(Math.min(decision.retryAfterMs, MAX_TIMER_MS), signal);
  }
}

/** Resolves after `ms`; rejects with the signal's reason once it aborts, as an abort before the call does. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const abort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', abort);
      resolve();
    }, ms);
    if (signal?.aborted) abort();
    else signal?.addEventListener('abort', abort, { once: true });
  });
}
