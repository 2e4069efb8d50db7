import type { Operation } from '../core/types.js';
import type { Algorithm } from './algorithm.js';
import { driverScript } from './driver-lua.js';
import { driverTwin, EACH } from './driver-twin.js';
import type { Arg, Script } from './script.js';

/** What a call asks of the script: an operation, or a quota lease's take (reported as a limit). */
export type Op = Operation | 'take';

/** The arguments of one call, before they are flattened into ARGV. */
export interface Call {
  readonly op: Op;
  /**
   * What the call costs: the same in every policy, or each policy's own (limit, peek, refund: from
   * 0 up; settle: what to take, or give back when negative, in each policy).
   */
  readonly cost: number | readonly number[];
  /**
   * block: its duration in ms; release and extend: the lease id; refund and settle: when the units
   * were charged (0: unknown); take: the fewest units to take (a quota lease's: see driver-lua.ts).
   */
  readonly target: number;
  /** extend: the new lease length in ms. */
  readonly ms: number;
  /** Consecutive denials that block the key (0: never), and for how long. */
  readonly penalty: { readonly strikes: number; readonly blockMs: number };
  readonly policies: readonly {
    readonly kind: Algorithm;
    readonly params: readonly number[];
    readonly maxCost: number;
  }[];
}

/** What a list of policies always sends: its script, and the policies' part of ARGV. */
interface Compiled {
  readonly script: Script;
  readonly policyArgs: readonly Arg[];
}

// Keyed by the list itself: a limiter's own list is built once, so its calls find it here.
const compiledLists = new WeakMap<Call['policies'], Compiled>();

/** The script and the policies' ARGV for a list of policies, built once per list. */
export function compiled(policies: Call['policies']): Compiled {
  let found = compiledLists.get(policies);
  if (!found) {
    const policyArgs: Arg[] = [];
    for (const { kind, params } of policies) policyArgs.push(kind.id, params.length, ...params);
    found = { script: scriptFor(policies.map((p) => p.kind)), policyArgs };
    compiledLists.set(policies, found);
  }
  return found;
}

/** ARGV for a call, in the driver's layout. */
export function scriptArgs(call: Call): Arg[] {
  const { cost, policies } = call;
  const head = [
    call.op,
    typeof cost === 'number' ? cost : EACH,
    call.target,
    call.ms,
    call.penalty.strikes,
    call.penalty.blockMs,
    policies.length,
    ...compiled(policies).policyArgs,
  ];
  if (typeof cost === 'number') return head;
  if (call.op !== 'settle') return [...head, ...cost];
  return [...head, ...cost.flatMap((c, i) => [c, (policies[i] as { readonly maxCost: number }).maxCost])];
}

/**
 * What a call's ARGV asks, read back (scriptArgs' layout is this file's business): its operation,
 * its cost where one cost serves every policy (else undefined), and its target.
 */
export function argsCall(args: readonly Arg[]): { op: Op; cost: number | undefined; target: number } {
  const [op, cost, target] = args;
  return { op: op as Op, cost: cost === EACH ? undefined : Number(cost), target: Number(target) };
}

const scripts = new Map<string, Script>();

/** The script for a set of algorithms: the driver, then their Lua. Built once per set. */
export function scriptFor(algorithms: readonly Algorithm[]): Script {
  const unique = [...new Map(algorithms.map((a) => [a.id, a])).values()].sort((a, b) => a.id.localeCompare(b.id));
  const name = unique.map((a) => a.id).join('+');
  let script = scripts.get(name);
  if (!script) {
    const twin = driverTwin(unique);
    const withoutPexpiretime = unique.some((a) => a.luaWithoutPexpiretime !== undefined)
      ? driverScript(
          `${name} without PEXPIRETIME`,
          unique.map((a) => a.luaWithoutPexpiretime ?? a.lua),
          twin,
        )
      : undefined;
    script = {
      ...driverScript(
        name,
        unique.map((a) => a.lua),
        twin,
      ),
      withoutPexpiretime,
    };
    scripts.set(name, script);
  }
  return script;
}
