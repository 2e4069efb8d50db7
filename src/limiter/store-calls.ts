import { callSuffixes, partName, stemmed } from '../core/keys.js';
import type { LimitOptions, Operation } from '../core/types.js';
import type { EnginePolicy } from '../engine/algorithm.js';
import { compiled, scriptArgs, type Op } from '../engine/driver.js';
import type { Arg, Reply, Script } from '../engine/script.js';
import type { LocalRun, Store } from '../engine/store.js';
import type { Costs } from './call-arguments.js';
import type { Answer, DecidingMethod, FailureGuard } from './failure.js';

/** The penalty box: block a key for `blockMs` after `strikes` denials in a row (0: no penalty box). */
export interface Penalty {
  readonly strikes: number;
  readonly blockMs: number;
}

/** The suffixes of a call's Redis keys and the memory store's names for the same parts. */
function layoutOf(prefix: string, list: readonly EnginePolicy[], withStrikes: boolean) {
  const suffixes = callSuffixes(list, withStrikes);
  return { suffixes, parts: suffixes.map((suffix) => partName(prefix, suffix)) };
}

/**
 * A limiter's calls to its store for some policies (its own, or those a call names): their keys,
 * script and arguments, asked through the failure guard, or at once of a local store.
 */
export class StoreCalls {
  readonly withStrikes: boolean;
  /** The store's local step, when it has one (Store.runLocal). */
  readonly runLocal: LocalRun | undefined;
  private readonly ownLayout: ReturnType<typeof layoutOf>;
  // The own policies' script at hand, without compiled()'s lookup on every call.
  private readonly ownScript: Script;
  // The arguments of the limiter's own calls (limit, peek, refund), built once per op and cost
  // (for the first 64 costs of each): equal calls share one array, which the Redis store then
  // sends once per batch, and which the twin and the Lua read once.
  private readonly ownArgs = new Map<Op, Map<number, readonly string[]>>();
  // The last of them asked for: most calls repeat it (a limit of cost 1), and skip the maps.
  private last: { readonly op: Op; readonly cost: number; readonly args: readonly string[] } | undefined;

  constructor(
    readonly store: Store,
    readonly guard: FailureGuard,
    readonly policies: readonly EnginePolicy[],
    readonly prefix: string,
    readonly penalty: Penalty,
  ) {
    this.withStrikes = penalty.strikes > 0;
    this.runLocal = store.runLocal;
    this.ownLayout = layoutOf(prefix, policies, this.withStrikes);
    this.ownScript = compiled(policies).script;
  }

  layout(list: readonly EnginePolicy[]): ReturnType<typeof layoutOf> {
    return list === this.policies ? this.ownLayout : layoutOf(this.prefix, list, this.withStrikes);
  }

  keysOf(id: string, list: readonly EnginePolicy[]): string[] {
    return stemmed(this.prefix, id, this.layout(list).suffixes);
  }

  scriptOf(list: readonly EnginePolicy[]): Script {
    return list === this.policies ? this.ownScript : compiled(list).script;
  }

  argsOf(list: readonly EnginePolicy[], op: Op, cost: Costs, target: number, ms: number): readonly Arg[] {
    const { penalty } = this;
    if (typeof cost !== 'number') return scriptArgs({ op, cost, target, ms, penalty, policies: list });
    const own = list === this.policies && target === 0 && ms === 0;
    const { last } = this;
    if (own && last !== undefined && last.op === op && last.cost === cost) return last.args;
    const known = own ? this.ownArgs.get(op)?.get(cost) : undefined;
    if (known !== undefined) {
      this.last = { op, cost, args: known };
      return known;
    }
    const args = scriptArgs({ op, cost, target, ms, penalty, policies: list });
    if (!own) return args;
    let byCost = this.ownArgs.get(op);
    if (byCost === undefined) this.ownArgs.set(op, (byCost = new Map<number, readonly string[]>()));
    const shared = args.map(String);
    if (byCost.size < 64) byCost.set(cost, shared);
    return shared;
  }

  /** A store call with no decision to fall back on: within the timeout, or a StoreError. */
  change(id: string, list: readonly EnginePolicy[], op: Operation, cost: Costs, target = 0, ms = 0): Promise<Reply> {
    return this.guard.settle(op, this.scriptOf(list), this.keysOf(id, list), this.argsOf(list, op, cost, target, ms));
  }

  /** A limit, peek or take on a local store, which answers at once and cannot fail: its reply. */
  localReply(id: string, list: readonly EnginePolicy[], op: Op, cost: Costs, target = 0): Reply {
    const runLocal = this.runLocal as LocalRun;
    return runLocal(id, this.layout(list).parts, this.scriptOf(list), this.argsOf(list, op, cost, target, 0));
  }

  /**
   * A limit, peek or take of the client `id` on a store that is not local, mapped by `answer`: asked
   * through the failure guard, which asks a fallback limiter `method` for `key` at `rawCost`.
   */
  decide<T>(
    method: DecidingMethod,
    id: string,
    list: readonly EnginePolicy[],
    cost: Costs,
    answer: Answer<T>,
    key: string,
    rawCost: LimitOptions['cost'],
    take?: { readonly least: number },
  ): Promise<T> {
    const op = take !== undefined ? 'take' : method === 'peek' ? 'peek' : 'limit';
    const { guard } = this;
    return guard.decide(
      method,
      list,
      this.scriptOf(list),
      this.keysOf(id, list),
      this.argsOf(list, op, cost, take?.least ?? 0, 0),
      answer,
      key,
      rawCost,
    );
  }

  /** Resets every key of the client `id`, the strikes key included. */
  reset(keys: readonly string[]): Promise<Reply> {
    return this.guard.settle('reset', this.ownScript, keys, this.argsOf(this.policies, 'reset', 1, 0, 0));
  }
}
