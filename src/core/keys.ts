import { createHash } from 'node:crypto';
import { InvalidArgumentError, InvalidOptionError } from './errors.js';

// The client's key sits inside the first {...} of the Redis key, so every key of one client
// hashes to one Redis Cluster slot. A prefix may not hold braces, which keeps that first `{` ours
// and the mapping from (prefix, key) to Redis key one-to-one.
const PREFIX = /^[^{}\s]{1,100}$/;

export const DEFAULT_PREFIX = 'sluice';

// Keys longer than this (in UTF-8 bytes) are stored under their SHA-256, so a client sending
// megabyte keys costs Redis (and the memory store) no more than one sending short ones.
export const MAX_RAW_KEY_BYTES = 256;

// A lone surrogate has no UTF-8 form: Redis clients would write U+FFFD for every one of them,
// and two different keys would share one quota.
const LONE_SURROGATE = /\p{Cs}/u;

export function validPrefix(value: unknown): string {
  if (value === undefined) return DEFAULT_PREFIX;
  if (typeof value !== 'string' || !PREFIX.test(value) || LONE_SURROGATE.test(value)) {
    throw new InvalidOptionError('prefix', value, 'from 1 to 100 characters of well-formed Unicode without "{", "}" or spaces');
  }
  return value;
}

export function validKey(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || LONE_SURROGATE.test(value)) {
    throw new InvalidArgumentError('key', value, 'a non-empty string of well-formed Unicode');
  }
  return value;
}

// A UTF-16 code unit takes at most 3 UTF-8 bytes, so a key this short never needs measuring.
const SURELY_SHORT = Math.floor(MAX_RAW_KEY_BYTES / 3);

/**
 * What every Redis key of one client starts with: `<prefix>:{<key>}:`, or, for a key that is too
 * long or would end its own hash tag at once (a leading `}` makes the tag empty, so Redis Cluster
 * would hash the whole name and scatter one client's keys over slots), `<prefix>:#{<sha256 of
 * key>}:`. The `#` before the brace, where a plain key has `:`, keeps hashed and plain keys apart,
 * so distinct keys always get distinct Redis keys.
 */
function clientStem(prefix: string, key: string): string {
  if (key.startsWith('}') || (key.length > SURELY_SHORT && Buffer.byteLength(key) > MAX_RAW_KEY_BYTES)) {
    return `${prefix}:#{${createHash('sha256').update(key).digest('hex')}}:`;
  }
  return `${prefix}:{${key}}:`;
}

/** The Redis key holding one part of a client's state, named by its suffix. */
export function storageKey(prefix: string, key: string, suffix: string): string {
  return clientStem(prefix, key) + suffix;
}

/**
 * The keys of one call, in the driver's order: the block key, the strikes key (consecutive
 * denials; only for a limiter with a penalty box, the only one that counts them), then one key per
 * policy, suffixed by its algorithm and its place in the list, so a per-call list of the same
 * shape (a tier) shares the state of the limiter's own.
 */
export function callKeys(prefix: string, key: string, policies: readonly { readonly kind: { readonly id: string } }[], withStrikes = false): string[] {
  const stem = clientStem(prefix, key);
  const keys = withStrikes ? [`${stem}blk`, `${stem}str`] : [`${stem}blk`];
  for (let i = 0; i < policies.length; i++) {
    const id = (policies[i] as { readonly kind: { readonly id: string } }).kind.id;
    keys.push(i === 0 ? stem + id : `${stem}${id}${i}`);
  }
  return keys;
}
