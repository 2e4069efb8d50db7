import { createHash } from 'node:crypto';
import { MAX_RAW_KEY_BYTES } from '../../src/core/keys.js';

const long = 'x'.repeat(MAX_RAW_KEY_BYTES + 1);

/**
 * Client keys an attacker or a careless caller may send: Redis glob and hash-tag characters,
 * separators, whitespace, control and binary-looking characters, Unicode (composed and not), keys
 * right at and past the length where they get hashed, and plain keys that look like hashed ones.
 */
export const hostileKeys: readonly string[] = [
  '{',
  '}',
  '{}',
  '}{',
  '{a}',
  'a}',
  '}a',
  '}}',
  '{a}{b}',
  'a{b}c',
  '*',
  '?',
  '[a-z]',
  '\\',
  ':',
  '::',
  'a:b',
  'a::b',
  'a:',
  ':a',
  ' ',
  'a b',
  ' a',
  'a ',
  '\t',
  '\n',
  '\r\n',
  '\0',
  'a\0b',
  '\x7f',
  '\xff\xfe',
  'Ã©',
  'é',
  'e\u0301',
  '🙂',
  '日本語',
  '\u200b',
  '\uFEFF',
  'x'.repeat(MAX_RAW_KEY_BYTES),
  long,
  `${long}y`,
  'x'.repeat(1_000_000),
  'é'.repeat(MAX_RAW_KEY_BYTES / 2 + 1),
  createHash('sha256').update(long).digest('hex'),
  `#{${createHash('sha256').update(long).digest('hex')}}`,
];
