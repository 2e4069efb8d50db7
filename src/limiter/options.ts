import { parseDuration, type Duration } from '../core/duration.js';
import { InvalidArgumentError, InvalidOptionError } from '../core/errors.js';
import { validPrefix } from '../core/keys.js';
import { LIMITER_PEER_NAMES } from '../core/peer-names.js';
import type { Policy, QuotaLeaseOptions } from '../core/types.js';
import { nestedOptions, optionsObject, positiveInteger } from '../core/validate.js';
import { isEnginePolicy, type EnginePolicy } from '../engine/algorithm.js';
import type { Store } from '../engine/store.js';
import { leasing } from './concurrency.js';
import { DeniedCache, type DeniedCacheOptions } from './denied-cache.js';
import { failureGuard, type FailureOptions } from './failure.js';
import { StoreCalls, type Penalty } from './store-calls.js';

export interface LimiterOptions extends FailureOptions {
  /** Where state lives: redisStore(client) or memoryStore(). */
  store: Store;
  /** What is allowed: one policy, or several decided together (admitted only if all admit). */
  policy: Policy | readonly Policy[];
  /** Namespaces this limiter's keys (default 'sluice'). No braces or spaces. */
  prefix?: string;
  /** Dry run: decide and count as usual, but always allow, marking would-be denials `shadowDenied`. */
  shadow?: boolean;
  /** The penalty box: after `after` denials in a row, block the key for `block`. */
  penalty?: { after: number; block: Duration };
  /** Answers from memory, without the store, cost-1 requests certain to be denied (see docs/performance.md). */
  deniedCache?: DeniedCacheOptions;
  /** Quota leases for hot keys: take `units` from the store at once, admit from them here (docs/leases.md). */
  lease?: QuotaLeaseOptions;
}

const LIMITER_OPTIONS = [
  'store',
  'policy',
  'prefix',
  'shadow',
  'penalty',
  'deniedCache',
  'lease',
  'timeout',
  'onStoreError',
  'onOutage',
  'onRecovery',
];

export function isStore(value: unknown): value is Store {
  return typeof value === 'object' && value !== null && typeof (value as Store).run === 'function';
}

/** `policy` as a list of distinct names; `Invalid` names a bad one as an option or as an argument. */
export function policyList(
  value: unknown,
  Invalid: typeof InvalidOptionError | typeof InvalidArgumentError,
): readonly EnginePolicy[] {
  const list = Array.isArray(value) ? (value as unknown[]) : [value];
  if (list.length === 0 || !list.every(isEnginePolicy)) {
    throw new Invalid(
      'policy',
      value,
      'a policy such as fixedWindow({ limit: 5, window: "1s" }), or a non-empty array of them',
    );
  }
  // Headers, problem bodies and decisions tell policies apart by name alone.
  const names = list.map((p) => p.name);
  const repeated = names.find((name, i) => names.indexOf(name) !== i);
  if (repeated !== undefined)
    throw new Invalid(
      'policy',
      value,
      `policies with distinct names; "${repeated}" names two of them (give each its own with { name })`,
    );
  return list;
}

/** What a limiter's calls share, read from its options. */
export interface LimiterParts {
  readonly policies: readonly EnginePolicy[];
  readonly prefix: string;
  readonly shadow: boolean;
  /** Whether its own policies lend slots by lease (acquire) rather than count requests (limit). */
  readonly ownLeases: boolean;
  readonly calls: StoreCalls;
  readonly denied: DeniedCache | undefined;
}

/** createLimiter's options, checked: bad options throw here, not on the first request. */
export function limiterParts(options: LimiterOptions): LimiterParts {
  const o = optionsObject('createLimiter', options, LIMITER_OPTIONS, LIMITER_PEER_NAMES);
  if (!isStore(o.store)) throw new InvalidOptionError('store', o.store, 'a store: redisStore(client) or memoryStore()');
  const store = o.store;
  const policies = policyList(o.policy, InvalidOptionError);
  const prefix = validPrefix(o.prefix);
  if (o.shadow !== undefined && typeof o.shadow !== 'boolean')
    throw new InvalidOptionError('shadow', o.shadow, 'true or false');
  const guard = failureGuard(o, policies, store);
  const denied =
    o.deniedCache === undefined || !policies.every((p) => p.kind.stableDenials === true)
      ? undefined
      : new DeniedCache(o.deniedCache);
  let penalty: Penalty = { strikes: 0, blockMs: 0 };
  if (o.penalty !== undefined) {
    const p = nestedOptions('penalty', o.penalty, ['after', 'block']);
    penalty = { strikes: positiveInteger('penalty.after', p.after), blockMs: parseDuration('penalty.block', p.block) };
  }
  const calls = new StoreCalls(store, guard, policies, prefix, penalty);
  return { policies, prefix, shadow: o.shadow === true, ownLeases: leasing(policies), calls, denied };
}
