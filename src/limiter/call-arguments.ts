import { CostExceedsLimitError, InvalidArgumentError } from '../core/errors.js';
import type { CostByUnit, Decision, Policy } from '../core/types.js';

/** A call's cost: one for every policy, or each policy's own (from a CostByUnit). */
export type Costs = number | readonly number[];

const COST_BY_UNIT = 'an object of whole numbers by unit, such as { requests: 1, tokens: 1200 }';

/**
 * Each policy's part of a CostByUnit: what its unit costs, 0 when left out. Every unit must be one a
 * policy counts (a misspelt unit would otherwise cost nothing), every amount a whole number from 0.
 */
function costsByUnit(argument: string, cost: object, policies: readonly Policy[]): number[] {
  if (Array.isArray(cost)) throw new InvalidArgumentError(argument, cost, COST_BY_UNIT);
  const units = new Set(policies.map((p) => p.counts));
  for (const [unit, amount] of Object.entries(cost)) {
    if (!units.has(unit))
      throw new InvalidArgumentError(
        `${argument}.${unit}`,
        amount,
        `the cost of a unit these policies count (${[...units].join(', ')})`,
      );
    if (!Number.isSafeInteger(amount) || (amount as number) < 0)
      throw new InvalidArgumentError(`${argument}.${unit}`, amount, 'a whole number of at least 0');
  }
  const byUnit = cost as CostByUnit;
  return policies.map((p) => byUnit[p.counts] ?? 0);
}

/** The `cost` of a limit, reserve or acquire: 1 when left out, and within every policy's most. */
export function validCost(cost: unknown, policies: readonly Policy[]): Costs {
  if (cost === undefined) return 1;
  if (typeof cost === 'object' && cost !== null) {
    const costs = costsByUnit('cost', cost, policies);
    if (costs.every((c) => c === 0))
      throw new InvalidArgumentError('cost', cost, 'a cost above 0 in at least one unit');
    policies.forEach((p, i) => {
      if ((costs[i] as number) > p.maxCost) throw new CostExceedsLimitError(costs[i] as number, p.maxCost);
    });
    return costs;
  }
  return validCostNumber(cost, policies, `a whole number of at least 1, or ${COST_BY_UNIT}`);
}

/** A `cost` given as one number: 1 when left out, and within every policy's most. `expected` says what the call takes. */
export function validCostNumber(
  cost: unknown,
  policies: readonly Policy[],
  expected = 'a whole number of at least 1',
): number {
  if (cost === undefined) return 1;
  if (typeof cost !== 'number' || !Number.isInteger(cost) || cost < 1)
    throw new InvalidArgumentError('cost', cost, expected);
  // A loop, not a spread of map(): no closure or arrays per decision.
  let tightest = Infinity;
  for (let i = 0; i < policies.length; i++) tightest = Math.min(tightest, (policies[i] as Policy).maxCost);
  if (cost > tightest) throw new CostExceedsLimitError(cost, tightest);
  return cost;
}

/**
 * What refund and settle take: a number for every policy, or a CostByUnit; from 0 when `zero`, else
 * above 0 (a CostByUnit: in at least one unit).
 */
export function validAmount(argument: string, amount: unknown, policies: readonly Policy[], zero: boolean): Costs {
  if (typeof amount === 'object' && amount !== null) {
    const costs = costsByUnit(argument, amount, policies);
    if (!zero && costs.every((c) => c === 0))
      throw new InvalidArgumentError(argument, amount, 'a cost above 0 in at least one unit');
    return costs;
  }
  const least = zero ? 0 : 1;
  if (!Number.isSafeInteger(amount) || (amount as number) < least)
    throw new InvalidArgumentError(
      argument,
      amount,
      `a whole number from ${least} to ${Number.MAX_SAFE_INTEGER}, or ${COST_BY_UNIT}`,
    );
  return amount as number;
}

/** Policy `i`'s part of `costs`. */
export function costOf(costs: Costs, i: number): number {
  return typeof costs === 'number' ? costs : (costs[i] as number);
}

/** A promise for what `start` returns, or rejected with what it throws: bad input rejects, as the API promises. */
export function promised<T>(start: () => Promise<T>): Promise<T> {
  try {
    return start();
  } catch (error) {
    return Promise.reject(error);
  }
}

// A call's options when it has none: one object for all such calls.
const NO_OPTIONS = Object.freeze({});

/** A call's options object, or one empty object when it has none. */
export function callOptions<T extends object>(value: T | undefined): Partial<T> {
  if (value === undefined) return NO_OPTIONS;
  if (typeof value !== 'object' || value === null)
    throw new InvalidArgumentError('options', value, 'an object such as { cost: 2 }');
  return value;
}

/** When a decision charged its units, by the store's clock; undefined if it charged none. */
export function chargeOf(decision: unknown): number | undefined {
  if (typeof decision !== 'object' || decision === null || typeof (decision as Decision).allowed !== 'boolean')
    throw new InvalidArgumentError(
      'decision',
      decision,
      'a decision of this limiter: what limit() or reserve() resolved with',
    );
  const { allowed, shadowDenied, reason, decidedAt } = decision as Decision;
  if (decidedAt !== undefined && (!Number.isSafeInteger(decidedAt) || decidedAt < 0))
    throw new InvalidArgumentError(
      'decision.decidedAt',
      decidedAt,
      'a time in ms since the epoch, as the store gave it',
    );
  return allowed && shadowDenied !== true && reason === undefined ? decidedAt : undefined;
}
