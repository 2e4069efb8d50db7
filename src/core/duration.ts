import { InvalidArgumentError, InvalidOptionError } from './errors.js';

/** A duration: whole milliseconds, or a string such as '250ms', '1s', '1.5m', '1h', '1d'. */
export type Duration = number | `${number}${DurationUnit}`;
type DurationUnit = 'ms' | 's' | 'm' | 'h' | 'd';

const UNIT_MS: Record<DurationUnit, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;
// Longer than any sensible window, and small enough that TIME-based arithmetic in Lua stays exact.
export const MAX_DURATION_MS = 366 * UNIT_MS.d;

/**
 * Parses a duration option into whole milliseconds, or throws InvalidOptionError naming the option.
 * `minMs` lets a caller demand more than one millisecond where Redis's expiry resolution requires it;
 * `Invalid` is the error to throw: InvalidArgumentError for a call's argument.
 */
export function parseDuration(
  option: string,
  value: unknown,
  minMs = 1,
  Invalid: typeof InvalidOptionError | typeof InvalidArgumentError = InvalidOptionError,
): number {
  const expected = `a duration of at least ${minMs} ms and at most 366 days: whole milliseconds or a string such as '250ms', '1s', '1m', '1h', '1d'`;
  let ms: number;
  if (typeof value === 'number') {
    ms = value;
  } else if (typeof value === 'string') {
    const match = DURATION.exec(value.trim());
    if (!match) throw new Invalid(option, value, expected);
    ms = Number(match[1]) * UNIT_MS[match[2] as DurationUnit];
  } else {
    throw new Invalid(option, value, expected);
  }
  if (!Number.isInteger(ms) || ms < minMs || ms > MAX_DURATION_MS) throw new Invalid(option, value, expected);
  return ms;
}

/** A duration in its largest whole unit, as parseDuration reads it: 60_000 is '1m', 1_500 is '1500ms'. */
export function formatDuration(ms: number): string {
  const unit = (['d', 'h', 'm', 's'] as const).find((u) => ms % UNIT_MS[u] === 0) ?? 'ms';
  return `${ms / UNIT_MS[unit]}${unit}`;
}
