import { sha256Hex } from '../core/digest.js';
import { InvalidOptionError } from '../core/errors.js';

/**
 * How the dashboard shows a client's key, which may be personal data (a user id, an IP address):
 * 'plain' as it is; 'truncate' its first half at most (8 characters at most) and '…'; 'hash' a
 * salted SHA-256, 12 hex digits, with a salt drawn per dashboard, so a hash cannot be looked up in
 * a table of known keys' hashes. Keys are held as they are in memory, and shown only as this says.
 */
export type KeyDisplay = 'plain' | 'truncate' | 'hash';

export const KEY_DISPLAYS: readonly KeyDisplay[] = ['plain', 'truncate', 'hash'];

export function validKeyDisplay(value: unknown): KeyDisplay {
  if (value === undefined) return 'plain';
  if (!KEY_DISPLAYS.includes(value as KeyDisplay))
    throw new InvalidOptionError('keys', value, "'plain', 'truncate' or 'hash'");
  return value as KeyDisplay;
}

/** The function that turns a key into what the dashboard shows of it. */
export function keyShower(display: KeyDisplay): (key: string) => string {
  if (display === 'plain') return (key) => key;
  if (display === 'truncate') return (key) => `${key.slice(0, Math.min(8, Math.ceil(key.length / 2)))}…`;
  const salt = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');
  return (key) => `#${sha256Hex(`${salt}:${key}`).slice(0, 12)}`;
}
