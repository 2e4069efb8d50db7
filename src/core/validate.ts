import { InvalidOptionError } from './errors.js';
import type { PeerNames } from './peer-names.js';

/**
 * The options object of a factory: a plain object holding only the options it knows, or
 * InvalidOptionError naming the factory (not an object) or the first unknown key. JavaScript has
 * no type check, so without this a mistyped option, or one carried over from another library,
 * would be silently ignored; for the latter, `peerNames` says what to use instead.
 */
export function optionsObject(
  factory: string,
  value: unknown,
  known: readonly string[],
  peerNames: PeerNames = {},
): Record<string, unknown> {
  return checkedOptions(factory, '', value, known, peerNames);
}

/** The object an option takes (`penalty: { after, block }`): as optionsObject, naming an unknown key by its path (`penalty.for`). */
export function nestedOptions(option: string, value: unknown, known: readonly string[]): Record<string, unknown> {
  return checkedOptions(option, `${option}.`, value, known, {});
}

function checkedOptions(
  owner: string,
  path: string,
  value: unknown,
  known: readonly string[],
  peerNames: PeerNames,
): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidOptionError(owner, value, 'an options object');
  }
  const options = value as Record<string, unknown>;
  const unknown = Object.keys(options).find((key) => !known.includes(key));
  if (unknown !== undefined) {
    const instead = Object.hasOwn(peerNames, unknown) ? peerNames[unknown] : `its options are ${known.join(', ')}`;
    throw new InvalidOptionError(
      path + unknown,
      options[unknown],
      `one of ${owner}'s options`,
      `${owner} has no option "${unknown}"; ${instead}`,
    );
  }
  return options;
}

export function positiveInteger(option: string, value: unknown, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
    throw new InvalidOptionError(option, value, `a whole number from 1 to ${max}`);
  }
  return value;
}

export function positiveFinite(option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new InvalidOptionError(option, value, 'a finite number greater than 0');
  }
  return value;
}

// A Structured Fields string may hold printable ASCII only; keep names simple enough for any header.
const POLICY_NAME = /^[A-Za-z0-9_.:-]{1,64}$/;

/** What a policy counts (its `counts` option): 'requests' unless it says otherwise, e.g. 'tokens'. */
export function policyUnit(value: unknown): string {
  if (value === undefined) return REQUESTS;
  if (typeof value !== 'string' || !POLICY_NAME.test(value)) {
    throw new InvalidOptionError(
      'counts',
      value,
      'a unit such as "tokens": from 1 to 64 characters of A-Z, a-z, 0-9, "_", ".", ":" or "-"',
    );
  }
  return value;
}

/** The unit of a policy that names none: one request is one. */
export const REQUESTS = 'requests';

export function policyName(value: unknown, fallback: string): string {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !POLICY_NAME.test(value)) {
    throw new InvalidOptionError('name', value, 'from 1 to 64 characters of A-Z, a-z, 0-9, "_", ".", ":" or "-"');
  }
  return value;
}
