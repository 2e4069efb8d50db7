/**
 * Typed errors. Being rate limited is never an error (it is a decision);
 * these are for misuse and failures. Each class has a stable `code` and a
 * link to its entry in docs/errors.md.
 */
// Relative to the package root: docs/ ships with the package and lives in the repository.
const DOCS = 'docs/errors.md';

export type SluiceErrorCode =
  | 'SLUICE_INVALID_OPTION'
  | 'SLUICE_INVALID_ARGUMENT'
  | 'SLUICE_COST_EXCEEDS_LIMIT'
  | 'SLUICE_WRONG_METHOD'
  | 'SLUICE_STORE_ERROR'
  | 'SLUICE_INVALID_CONFIG';

/**
 * The code of every process warning sluice emits (`process.emitWarning(message, { code })`, the
 * console where there is no process), each explained in docs/errors.md under its own name.
 */
export type SluiceWarningCode =
  | 'SLUICE_STORE_FAILED'
  | 'SLUICE_HOOK_FAILED'
  | 'SLUICE_EVICTABLE_KEYS'
  | 'SLUICE_PROXY_HEADER_IGNORED'
  | 'SLUICE_PROXY_CHAIN_SHORT'
  | 'SLUICE_CLIENT_ADDRESS_UNKNOWN'
  | 'SLUICE_SETTLE_FAILED';

export abstract class SluiceError extends Error {
  abstract readonly code: SluiceErrorCode;

  /** Where this error is explained, with what to do about it. */
  get docs(): string {
    return `${DOCS}#${this.code.toLowerCase()}`;
  }
}

/** Renders a bad value for a message without ever throwing (symbols, cycles, bigints). */
export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 80 ? `${value.slice(0, 77)}...` : value);
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return String(value);
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return 'an array';
  return /^[aeiou]/.test(typeof value) ? `an ${typeof value}` : `a ${typeof value}`;
}

/** `value` in the words of the YAML it was read from: a list, a map. */
function describeYaml(value: unknown): string {
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' && value !== null ? 'a map' : describe(value);
}

/**
 * An option given to a factory (createLimiter, a policy, a store, a middleware) is missing, invalid
 * or unknown. `message`, when given, replaces the usual "must be ..." (an unknown option's).
 */
export class InvalidOptionError extends SluiceError {
  readonly code = 'SLUICE_INVALID_OPTION';
  constructor(
    readonly option: string,
    readonly value: unknown,
    expected: string,
    message = `option "${option}" must be ${expected}; got ${describe(value)}`,
  ) {
    super(`sluice: ${message}`);
    this.name = 'InvalidOptionError';
  }
}

/** An argument of a call (the key, the cost) is invalid. Nothing was sent to the store. */
export class InvalidArgumentError extends SluiceError {
  readonly code = 'SLUICE_INVALID_ARGUMENT';
  constructor(
    readonly argument: string,
    readonly value: unknown,
    expected: string,
  ) {
    super(`sluice: argument "${argument}" must be ${expected}; got ${describe(value)}`);
    this.name = 'InvalidArgumentError';
  }
}

/** The cost asked for can never be admitted by the policy, however long the caller waits. */
export class CostExceedsLimitError extends SluiceError {
  readonly code = 'SLUICE_COST_EXCEEDS_LIMIT';
  constructor(
    readonly cost: number,
    readonly limit: number,
  ) {
    super(`sluice: a cost of ${cost} can never be admitted by a policy whose limit is ${limit}`);
    this.name = 'CostExceedsLimitError';
  }
}

/** A call that the limiter's policies do not support: limit() on a concurrency policy, acquire() without one. */
export class WrongMethodError extends SluiceError {
  readonly code = 'SLUICE_WRONG_METHOD';
  constructor(message: string) {
    super(`sluice: ${message}`);
    this.name = 'WrongMethodError';
  }
}

/**
 * A rate-limit configuration of `sluice serve` is invalid: `file` is the file, `path` the place
 * inside its document (`descriptors[2].rate_limit.unit`; `line 2, column 1` for text that is not
 * YAML; empty for the whole file), `value` what is there. A running service keeps its previous
 * configuration.
 */
export class InvalidConfigError extends SluiceError {
  readonly code = 'SLUICE_INVALID_CONFIG';
  constructor(
    readonly file: string,
    readonly path: string,
    readonly value: unknown,
    problem: string,
  ) {
    super(
      `sluice: config ${file}${path === '' ? '' : ` at ${path}`}: ${problem}${value === undefined ? '' : `; got ${describeYaml(value)}`}`,
    );
    this.name = 'InvalidConfigError';
  }
}

/** The store failed (connection lost, timeout, unexpected reply). The original error is `cause`. */
export class StoreError extends SluiceError {
  readonly code = 'SLUICE_STORE_ERROR';
  constructor(message: string, options?: { cause?: unknown }) {
    super(`sluice: store failed: ${message}`, options);
    this.name = 'StoreError';
  }
}

/**
 * The store did not answer within the limiter's `timeout`, or the call reached Redis only after it
 * and was refused there, counting nothing.
 */
export class StoreTimeoutError extends StoreError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreTimeoutError';
  }
}

/**
 * Redis refused sluice's user a command or a key (an ACL). Still a store failure, answered as one,
 * but one that lasts until the user is granted `missing`: an ACL rule as Redis names it, such as
 * `+time`, `+pexpire or +del` (a script line calling either), or the key pattern `~sluice:*`.
 */
export class StorePermissionError extends StoreError {
  constructor(
    readonly missing: string,
    reply: string,
    options?: { cause?: unknown },
  ) {
    super(
      `the Redis user lacks ${missing} (${reply}); grant it as docs/reliability.md#least-privilege-acl shows`,
      options,
    );
    this.name = 'StorePermissionError';
  }
}

/**
 * What a thrown value says: an Error's message, else the value as text. Never throws, though
 * String() does for a value without a toString (an object of null prototype): the code reporting
 * a failure must not fail itself, or the call it answers is never answered.
 */
export function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  try {
    return String(error);
  } catch {
    return Object.prototype.toString.call(error);
  }
}

/** Any failure of a store call as a StoreError, keeping the original as `cause`. */
export function toStoreError(error: unknown): StoreError {
  if (error instanceof StoreError) return error;
  return new StoreError(messageOf(error), { cause: error });
}
