import { InvalidArgumentError, InvalidOptionError } from './errors.js';

// The client's key sits inside the first {...} of the Redis key, so every key of one client
// hashes to one Redis Cluster slot. A prefix may not hold braces, which keeps that first `{` ours
// and the mapping from (prefix, key) to Redis key one-to-one.
const PREFIX = /^[^{}\s]{1,100}$/;

export const DEFAULT_PREFIX = 'sluice';

export function validPrefix(value: unknown): string {
  if (value === undefined) return DEFAULT_PREFIX;
  if (typeof value !== 'string' || !PREFIX.test(value)) {
    throw new InvalidOptionError('prefix', value, 'from 1 to 100 characters without "{", "}" or spaces');
  }
  return value;
}

export function validKey(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new InvalidArgumentError('key', value, 'a non-empty string');
  }
  return value;
}

/** The Redis key holding a client's state: `<prefix>:{<key>}:<algorithm suffix>`. */
export function storageKey(prefix: string, key: string, suffix: string): string {
  return `${prefix}:{${key}}:${suffix}`;
}
