import { sha256Hex } from './digest.js';
import { InvalidArgumentError, InvalidOptionError } from './errors.js';

// The client's key sits inside the first {...} of the Redis key, so every key of one client
// hashes to one Redis Cluster slot. A prefix may not hold braces, which keeps that first `{` ours
// and the mapping from (prefix, key) to Redis key one-to-one.
const PREFIX = /^[^{}\s]{1,100}$/;
// An algorithm's id, and its place in a limiter's list after the first ('fw', 'sl2'), or 'blk', 'str'.
const SUFFIX = /^[a-z]+\d*$/;

export const DEFAULT_PREFIX = 'sluice';

// Keys longer than this (in UTF-8 bytes) are stored under their SHA-256, so a client sending
// megabyte keys costs Redis (and the memory store) no more than one sending short ones.
export const MAX_RAW_KEY_BYTES = 256;

export function validPrefix(value: unknown): string {
  if (value === undefined) return DEFAULT_PREFIX;
  if (typeof value !== 'string' || !PREFIX.test(value) || !value.isWellFormed()) {
    throw new InvalidOptionError(
      'prefix',
      value,
      'from 1 to 100 characters of well-formed Unicode without "{", "}" or spaces',
    );
  }
  return value;
}

// A key with a lone surrogate is not well-formed: it has no UTF-8 form, so Redis clients would write
// U+FFFD for every one of them, and two different keys would share one quota.
export function validKey(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || !value.isWellFormed()) {
    throw new InvalidArgumentError('key', value, 'a non-empty string of well-formed Unicode');
  }
  return value;
}

// A UTF-16 code unit takes at most 3 UTF-8 bytes, so a key this short never needs measuring.
const SURELY_SHORT = Math.floor(MAX_RAW_KEY_BYTES / 3);

/** The UTF-8 length of a well-formed string: a surrogate pair (4 bytes) is two code units of 2. */
function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0x80) bytes += unit < 0x800 || (unit >= 0xd800 && unit < 0xe000) ? 1 : 2;
  }
  return bytes;
}

/**
 * Who a key's state belongs to: the key itself, or, for a key that is too long or would end its own
 * Redis Cluster hash tag at once (a leading `}` makes the tag empty, so the cluster would hash the
 * whole name and scatter one client's keys over slots), `}` and the key's SHA-256. A key that starts
 * with `}` is always hashed, so a hashed id never equals a key used as it is.
 */
export function clientId(key: string): string {
  if (key.startsWith('}') || (key.length > SURELY_SHORT && utf8Length(key) > MAX_RAW_KEY_BYTES)) {
    return `}${sha256Hex(key)}`;
  }
  return key;
}

/**
 * What every Redis key of one client starts with: `<prefix>:{<id>}:`, or, for a hashed id,
 * `<prefix>:#{<sha256 of key>}:`. The `#` before the brace, where a plain key has `:`, keeps hashed
 * and plain keys apart, so distinct keys always get distinct Redis keys.
 */
function clientStem(prefix: string, id: string): string {
  return id.startsWith('}') ? `${prefix}:#{${id.slice(1)}}:` : `${prefix}:{${id}}:`;
}

/** The Redis key holding one part of a client's state, named by its suffix. */
export function storageKey(prefix: string, key: string, suffix: string): string {
  return clientStem(prefix, clientId(key)) + suffix;
}

/**
 * The suffixes of one call's keys, in the driver's order: the block key, the strikes key
 * (consecutive denials; only for a limiter with a penalty box, the only one that counts them), then
 * one key per policy, suffixed by its algorithm and its place in the list, so a per-call list of the
 * same shape (a tier) shares the state of the limiter's own.
 */
export function callSuffixes(
  policies: readonly { readonly kind: { readonly id: string } }[],
  withStrikes = false,
): string[] {
  const suffixes = withStrikes ? ['blk', 'str'] : ['blk'];
  policies.forEach(({ kind }, i) => suffixes.push(i === 0 ? kind.id : `${kind.id}${i}`));
  return suffixes;
}

/** The Redis keys of one call: its client's stem and each of `callSuffixes`. */
export function callKeys(
  prefix: string,
  key: string,
  policies: readonly { readonly kind: { readonly id: string } }[],
  withStrikes = false,
): string[] {
  return stemmed(prefix, clientId(key), callSuffixes(policies, withStrikes));
}

/** The Redis keys of one client's state parts. */
export function stemmed(prefix: string, id: string, suffixes: readonly string[]): string[] {
  const stem = clientStem(prefix, id);
  return suffixes.map((suffix) => stem + suffix);
}

// A prefix holds no brace, so a key's first `{` opens its hash tag, right after `:` or `:#`.
function prefixEnd(key: string, open: number): number {
  return open - (key[open - 1] === '#' ? 2 : 1);
}

/**
 * The ACL key pattern that grants every key of the limiter a Redis key belongs to: `~<prefix>:*`,
 * with the prefix's glob characters escaped, so that it matches that prefix alone.
 */
export function aclKeyPattern(key: string): string {
  return `~${key.slice(0, prefixEnd(key, key.indexOf('{'))).replace(/[*?[\]\\]/g, '\\$&')}:*`;
}

/**
 * A Redis key split back into its client's id and the part's name (`<prefix> <suffix>`; a prefix
 * holds no space), as the memory store holds it: the inverse of `stemmed`. Undefined for any key
 * sluice does not write, so that such a key is never mistaken for a part of a client's state.
 */
export function splitKey(key: string): { id: string; part: string } | undefined {
  const open = key.indexOf('{');
  const close = key.lastIndexOf('}:');
  if (open < 0 || close < open) return undefined;
  const hashed = key[open - 1] === '#';
  const stemEnd = prefixEnd(key, open);
  const prefix = key.slice(0, stemEnd);
  const suffix = key.slice(close + 2);
  if (key[stemEnd] !== ':' || !PREFIX.test(prefix) || !SUFFIX.test(suffix)) return undefined;
  const id = key.slice(open + 1, close);
  return { id: hashed ? `}${id}` : id, part: partName(prefix, suffix) };
}

/** The memory store's name for one part of a client's state. */
export function partName(prefix: string, suffix: string): string {
  return `${prefix} ${suffix}`;
}
