import { parseDuration } from '../core/duration.js';
import { InvalidOptionError } from '../core/errors.js';
import { fixedWindow, gcra, slidingLog, slidingWindow, tokenBucket, type Policy } from '../index.js';
import { at, type Fields, type Reader } from './config-reader.js';

const DAY_MS = 86_400_000;

/**
 * envoyproxy/ratelimit's units, as Envoy's RateLimitUnit names them, with their length: a week,
 * month and year are 7, 30 and 365 days, as that server counts them.
 */
export const UNIT_MS = {
  SECOND: 1_000,
  MINUTE: 60_000,
  HOUR: 3_600_000,
  DAY: DAY_MS,
  WEEK: 7 * DAY_MS,
  MONTH: 30 * DAY_MS,
  YEAR: 365 * DAY_MS,
} as const;
export type UnitName = keyof typeof UNIT_MS | 'UNKNOWN';

/** The units by their number in the RateLimitUnit enum (WEEK came last, as 7). */
export const UNIT_NUMBERS: readonly UnitName[] = [
  'UNKNOWN',
  'SECOND',
  'MINUTE',
  'HOUR',
  'DAY',
  'MONTH',
  'YEAR',
  'WEEK',
];

/** The limit a descriptor status reports as `current_limit`. */
export interface ReportedLimit {
  readonly requestsPerUnit: number;
  /** UNKNOWN for a `window` that is no whole unit ('5m'): the RateLimit headers then tell it. */
  readonly unit: UnitName;
  readonly name?: string;
}

/** One `rate_limit` of a rule: the sluice policy it builds and what Envoy is told about it. */
export interface Limit {
  readonly policy: Policy;
  readonly reported: ReportedLimit;
}

/** A `requests_per_unit: 0` limit, which denies every request: what it reports, and its window. */
export interface DenyAll {
  readonly reported: ReportedLimit;
  readonly windowMs: number;
}

/** A rule's `lease`, as createLimiter's `lease` takes it: `ms` in ms. */
export interface RuleLease {
  readonly units: number;
  readonly ms: number;
}

/** What a rule's `rate_limit` or `rate_limits` hold. */
export interface ParsedLimits {
  readonly limits: readonly Limit[];
  readonly denyAll: DenyAll | undefined;
  readonly unlimited: boolean;
  readonly names: readonly string[];
  readonly replaces: readonly string[];
  /** sluice's `lease`: the rule's one limit is decided through quota leases (docs/leases.md). */
  readonly lease?: RuleLease;
}

const RATE_LIMIT_FIELDS = [
  'unit',
  'requests_per_unit',
  'name',
  'unlimited',
  'replaces',
  'algorithm',
  'window',
  'burst',
  'lease',
];
const LEASE_FIELDS = ['units', 'ms'];
const ALGORITHMS = ['fixed_window', 'sliding_log', 'sliding_window', 'token_bucket', 'gcra'] as const;
type AlgorithmName = (typeof ALGORITHMS)[number];
// Names that sluice's RateLimit headers can carry as they are; any other name is kept for `replaces` only.
const HEADER_SAFE_NAME = /^[A-Za-z0-9_.:-]{1,64}$/;
const UNIT_WORDS = 'second, minute, hour, day, week, month or year';

/** The option a policy factory names, as the YAML field that gave it. */
const FIELD_OF_OPTION: Readonly<Record<string, string>> = {
  limit: 'requests_per_unit',
  refillPerSecond: 'requests_per_unit',
  capacity: 'burst',
  burst: 'burst',
  window: 'window',
  period: 'window',
  name: 'name',
};

function buildPolicy(
  algorithm: AlgorithmName,
  requestsPerUnit: number,
  windowMs: number,
  burst: number | undefined,
  name: string | undefined,
): Policy {
  const named = name === undefined ? {} : { name };
  switch (algorithm) {
    case 'fixed_window':
      return fixedWindow({ limit: requestsPerUnit, window: windowMs, ...named });
    case 'sliding_log':
      return slidingLog({ limit: requestsPerUnit, window: windowMs, ...named });
    case 'sliding_window':
      return slidingWindow({ limit: requestsPerUnit, window: windowMs, ...named });
    case 'token_bucket':
      return tokenBucket({
        capacity: burst ?? requestsPerUnit,
        refillPerSecond: (requestsPerUnit * 1000) / windowMs,
        ...named,
      });
    case 'gcra':
      return gcra({ limit: requestsPerUnit, period: windowMs, ...(burst === undefined ? {} : { burst }), ...named });
  }
}

/** The Envoy unit a window is exactly, else UNKNOWN. */
function unitOf(windowMs: number): UnitName {
  const unit = (Object.keys(UNIT_MS) as (keyof typeof UNIT_MS)[]).find((u) => UNIT_MS[u] === windowMs);
  return unit ?? 'UNKNOWN';
}

function durationOf(reader: Reader, path: string, value: unknown): number {
  try {
    return parseDuration(path, value);
  } catch {
    return reader.fail(path, "must be a duration such as '90s', '5m', '1h' (whole ms from 1 ms to 366 days)", value);
  }
}

/** The window a rate limit gives by `unit` or `window`, and the unit it reports. */
function windowAndUnit(reader: Reader, path: string, fields: Fields): { windowMs: number; unit: UnitName } {
  if (fields.unit !== undefined && fields.window !== undefined)
    reader.fail(at(path, 'window'), 'give "unit" or "window", not both', fields.window);
  if (fields.window !== undefined) {
    const windowMs = durationOf(reader, at(path, 'window'), fields.window);
    return { windowMs, unit: unitOf(windowMs) };
  }
  const given = fields.unit;
  const unit = (typeof given === 'string' ? given.toUpperCase() : '') as UnitName;
  if (!Object.hasOwn(UNIT_MS, unit))
    reader.fail(at(path, 'unit'), `must be ${UNIT_WORDS} (or give a "window" such as 5m)`, given);
  return { windowMs: UNIT_MS[unit as keyof typeof UNIT_MS], unit };
}

function algorithmOf(reader: Reader, path: string, fields: Fields): AlgorithmName {
  const algorithm = (fields.algorithm ?? 'fixed_window') as AlgorithmName;
  if (!ALGORITHMS.includes(algorithm))
    reader.fail(at(path, 'algorithm'), `must be one of ${ALGORITHMS.join(', ')}`, fields.algorithm);
  return algorithm;
}

/** The policy of one counted rate limit, its factory's complaint turned into the YAML field's. */
function policyOf(reader: Reader, path: string, fields: Fields, rpu: number, windowMs: number, name?: string): Policy {
  const algorithm = algorithmOf(reader, path, fields);
  if (fields.burst !== undefined && algorithm !== 'token_bucket' && algorithm !== 'gcra')
    reader.fail(at(path, 'burst'), 'applies to token_bucket and gcra only', fields.burst);
  const policyName = name !== undefined && HEADER_SAFE_NAME.test(name) ? name : undefined;
  try {
    return buildPolicy(algorithm, rpu, windowMs, fields.burst as number | undefined, policyName);
  } catch (error) {
    if (!(error instanceof InvalidOptionError)) throw error;
    const field = FIELD_OF_OPTION[error.option] ?? error.option;
    return reader.fail(
      at(path, field === 'window' && fields.window === undefined ? 'unit' : field),
      error.message.replace(/^sluice: option "[^"]+" must be /, `for ${algorithm}, must be `).replace(/; got .*$/, ''),
      fields[field] ?? fields.unit,
    );
  }
}

const SLIDING_LOG_TAKES_NO_LEASE =
  'sliding_log takes no lease: the log counts each unit for one window from the ms it was charged, so a leased unit used later would leave the log before the request it admitted leaves the window (sliding_window takes one)';
const LISTED_TAKES_NO_LEASE =
  'a lease takes one limit\'s quota ahead, and several limits would each need their own: give it on a descriptor whose one limit is its "rate_limit"';

/** A rate limit's `lease`: `units` up to the most its policy admits at once, `ms` a duration. */
function leaseOf(reader: Reader, path: string, fields: Fields, policy: Policy): RuleLease {
  const leasePath = at(path, 'lease');
  if (algorithmOf(reader, path, fields) === 'sliding_log') reader.fail(leasePath, SLIDING_LOG_TAKES_NO_LEASE);
  const lease = reader.map(leasePath, fields.lease, LEASE_FIELDS);
  const { units } = lease;
  if (typeof units !== 'number' || !Number.isInteger(units) || units < 1 || units > policy.maxCost)
    reader.fail(
      at(leasePath, 'units'),
      `must be a whole number from 1 to ${policy.maxCost}, the most this limit admits at once`,
      units,
    );
  return { units, ms: durationOf(reader, at(leasePath, 'ms'), lease.ms) };
}

/** One `rate_limit` map; `leaseRefused`, why it may not hold a `lease` here. */
function parseRateLimit(reader: Reader, path: string, value: unknown, leaseRefused?: string): ParsedLimits {
  const fields = reader.map(path, value, RATE_LIMIT_FIELDS);
  if (leaseRefused !== undefined && fields.lease !== undefined) reader.fail(at(path, 'lease'), leaseRefused);
  const name = fields.name === undefined ? undefined : reader.text(at(path, 'name'), fields.name);
  const replaces = reader.list(at(path, 'replaces'), fields.replaces).map((item, i) => {
    const replaced = reader.map(`${at(path, 'replaces')}[${i}]`, item, ['name']);
    return reader.text(`${at(path, 'replaces')}[${i}].name`, replaced.name);
  });
  if (name !== undefined && replaces.includes(name))
    reader.fail(at(path, 'replaces'), `a rate limit cannot replace itself ("${name}")`);
  const names = name === undefined ? [] : [name];
  const unlimited = reader.flag(at(path, 'unlimited'), fields.unlimited);
  if (unlimited) {
    const counted = ['unit', 'window', 'requests_per_unit', 'algorithm', 'burst', 'lease'].find(
      (f) => fields[f] !== undefined,
    );
    if (counted !== undefined) reader.fail(at(path, counted), `"unlimited: true" takes no ${counted}`, fields[counted]);
    return { limits: [], denyAll: undefined, unlimited, names, replaces };
  }
  const rpu = fields.requests_per_unit;
  if (typeof rpu !== 'number' || !Number.isInteger(rpu) || rpu < 0 || rpu > 0xffff_ffff)
    reader.fail(at(path, 'requests_per_unit'), 'must be a whole number from 0 (deny every request) to 4294967295', rpu);
  const { windowMs, unit } = windowAndUnit(reader, path, fields);
  const reported: ReportedLimit = { requestsPerUnit: rpu, unit, ...(name === undefined ? {} : { name }) };
  if (rpu === 0) {
    // Every request is over a limit of 0, whatever the algorithm; a burst would admit some, a lease has nothing to take.
    const admitting = ['burst', 'lease'].find((f) => fields[f] !== undefined);
    if (admitting !== undefined)
      reader.fail(
        at(path, admitting),
        `"requests_per_unit: 0" denies every request, so takes no ${admitting}`,
        fields[admitting],
      );
    algorithmOf(reader, path, fields);
    return { limits: [], denyAll: { reported, windowMs }, unlimited, names, replaces };
  }
  const policy = policyOf(reader, path, fields, rpu, windowMs, name);
  const lease = fields.lease === undefined ? undefined : leaseOf(reader, path, fields, policy);
  return { limits: [{ policy, reported }], denyAll: undefined, unlimited, names, replaces, ...(lease && { lease }) };
}

/** A rule's limits: `rate_limit` (envoyproxy/ratelimit's one), or sluice's `rate_limits` (several, decided together). */
export function parseLimits(reader: Reader, path: string, fields: Fields): ParsedLimits | undefined {
  if (fields.rate_limit !== undefined && fields.rate_limits !== undefined)
    reader.fail(at(path, 'rate_limits'), 'give "rate_limit" or "rate_limits", not both');
  if (fields.rate_limit !== undefined) return parseRateLimit(reader, at(path, 'rate_limit'), fields.rate_limit);
  if (fields.rate_limits === undefined) return undefined;
  const listPath = at(path, 'rate_limits');
  const items = reader.list(listPath, fields.rate_limits);
  if (items.length === 0) reader.fail(listPath, 'must hold at least one rate limit');
  const parsed = items.map((item, i) => parseRateLimit(reader, `${listPath}[${i}]`, item, LISTED_TAKES_NO_LEASE));
  parsed.forEach((p, i) => {
    if (p.unlimited)
      reader.fail(`${listPath}[${i}].unlimited`, 'use "rate_limit: { unlimited: true }" on its own, not in a list');
    if (p.denyAll !== undefined)
      reader.fail(
        `${listPath}[${i}].requests_per_unit`,
        'a limit of 0 denies every request: give it as the descriptor\'s only "rate_limit"',
        0,
      );
  });
  return {
    limits: parsed.flatMap((p) => p.limits),
    denyAll: undefined,
    unlimited: false,
    names: parsed.flatMap((p) => p.names),
    replaces: parsed.flatMap((p) => p.replaces),
  };
}
