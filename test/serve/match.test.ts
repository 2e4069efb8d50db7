import assert from 'node:assert/strict';
import { it } from 'node:test';
import fc from 'fast-check';
import { parseConfig } from '../../src/serve/config.js';
import { jsonString, limiterKey, matchDescriptor } from '../../src/serve/match.js';
import { hostileKeys } from '../support/hostile-keys.js';

// A limiter key is the JSON of [domain, key, value, ...]: the state of every key counted so far
// lives under it, so the way it is written must never change.

it('jsonString writes every string as JSON.stringify does', () => {
  const specials = [
    '',
    '"',
    '\\',
    '\u0000',
    '\u001f',
    ' ',
    '\u007f',
    '\u2028',
    '\ud800',
    '\udfff',
    '\ud83d\ude00',
    'a"b',
  ];
  for (const text of [...hostileKeys, ...specials]) assert.equal(jsonString(text), JSON.stringify(text), text);
  fc.assert(
    fc.property(fc.string({ unit: 'binary' }), (text) => jsonString(text) === JSON.stringify(text)),
    { numRuns: 5000 },
  );
});

it('a descriptor counts under the JSON of its domain and entries, a shared wildcard under its pattern', () => {
  const text = [
    'domain: "d\\"x"',
    'descriptors:',
    '  - key: k',
    '    descriptors:',
    '      - key: path',
    '        value: "/api/*"',
    '        share_threshold: true',
    '        rate_limit: { unit: second, requests_per_unit: 1 }',
    '      - key: user',
    '        rate_limit: { unit: second, requests_per_unit: 1 }',
  ].join('\n');
  const domain = parseConfig([{ file: 'match.yaml', text }]).domains.get('d"x');
  assert.ok(domain);
  for (const value of hostileKeys) {
    const user = matchDescriptor(domain, [
      { key: 'k', value },
      { key: 'user', value },
    ]);
    assert.equal(user?.key, JSON.stringify(['d"x', 'k', value, 'user', value]), value);
    // An override's key, written by the same function.
    assert.equal(limiterKey(value, [{ key: value, value }]), JSON.stringify([value, value, value]), value);
  }
  const shared = matchDescriptor(domain, [
    { key: 'k', value: '\n' },
    { key: 'path', value: '/api/"v1"' },
  ]);
  assert.equal(shared?.key, JSON.stringify(['d"x', 'k', '\n', 'path', '/api/*']));
});
