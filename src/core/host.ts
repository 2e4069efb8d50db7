/**
 * What sluice asks of its host beyond Web-standard APIs, each taken where the host has it and done
 * without where it has not. Node, Bun and Deno have a `process`, and keep running while a timer is
 * armed unless it is unref'd; a Worker (Cloudflare's workerd, Vercel Edge) has no process to warn
 * through or to keep running, and its timers are plain numbers.
 */

import { messageOf, type SluiceWarningCode } from './errors.js';

interface HostProcess {
  emitWarning?(message: string, options: { type?: string; code?: string }): void;
  nextTick?(callback: () => void): void;
}

const hostProcess = (globalThis as { process?: HostProcess }).process;

/**
 * A warning, through process.emitWarning (so `process.on('warning')` and `--no-warnings` see it),
 * or the console where there is no process. Every warning sluice gives has a code, listed in
 * docs/errors.md; its `name` is Node's 'Warning'.
 */
export function warn(message: string, options: { code: SluiceWarningCode }): void {
  if (typeof hostProcess?.emitWarning === 'function') hostProcess.emitWarning(message, options);
  else console.warn(`Warning [${options.code}]: ${message}`);
}

/**
 * Calls a user's callback `name` with `event`. A callback that throws must not turn a decision
 * into a failure: its error becomes a SLUICE_HOOK_FAILED warning.
 */
export function callHook<E>(name: string, hook: ((event: E) => void) | undefined, event: E, owner?: object): void {
  if (!hook) return;
  try {
    // Called as a method of its owner: a class instance's callback keeps its this.
    hook.call(owner, event);
  } catch (error) {
    warn(`sluice: ${name} threw: ${messageOf(error)}`, {
      code: 'SLUICE_HOOK_FAILED',
    });
  }
}

/**
 * Whether a timer outlives the request whose handler armed it. Not in Cloudflare's workerd (its
 * `navigator.userAgent` is 'Cloudflare-Workers'): a timer belongs to the request that set it and is
 * dropped when that request ends, so one armed for a request cannot serve another's deadline.
 */
export const timersOutliveRequests =
  (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent !== 'Cloudflare-Workers';

/**
 * Runs `callback` soon, after the work queued now: process.nextTick where there is one (Node runs it
 * once the promise continuations already queued have run, so the calls they make join the same
 * batch), a microtask elsewhere.
 */
export const afterThisTick: (callback: () => void) => void =
  typeof hostProcess?.nextTick === 'function'
    ? hostProcess.nextTick.bind(hostProcess)
    : (callback) => queueMicrotask(callback);

const hostSetImmediate = (globalThis as { setImmediate?: (callback: () => void) => unknown }).setImmediate;

/**
 * Runs `callback` once the event loop has handled every event ready now: setImmediate where there
 * is one (Node, Bun, Deno), afterThisTick elsewhere. A server reads each request in a callback of
 * its own, so the calls of requests that arrived together meet only here, not at the end of a tick.
 * Not in workerd, even where nodejs_compat gives it setImmediate: there the work a callback starts
 * belongs to the request that scheduled it, so it must not carry another request's calls.
 */
export const afterThisTurn: (callback: () => void) => void =
  typeof hostSetImmediate === 'function' && timersOutliveRequests
    ? (callback) => void hostSetImmediate(callback)
    : afterThisTick;

type Timer = ReturnType<typeof setTimeout>;

/** The longest delay a timer takes: Node fires a longer one at once, with a TimeoutOverflowWarning. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** Whether an armed timer keeps the process running (Node's and Bun's timers); a no-op where a timer is a number. */
export function holdProcessOpen(timer: Timer | undefined, hold: boolean): void {
  if (typeof timer !== 'object' || timer === null) return;
  if (hold) timer.ref?.();
  else timer.unref?.();
}
