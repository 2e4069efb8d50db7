import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sameLine, shownOutput } from '../support/examples.js';

describe("the docs' example checker (test/support/examples.ts)", () => {
  it('reads the output a comment shows beside a console.log, or in the comment lines below it, in order', () => {
    const example = [
      'console.log(1); // 1',
      'const x = 2; // not output',
      'console.log({ a: 1, b: [2] });',
      '// {',
      '//   a: 1,',
      '//',
      '//   b: [ 2 ]',
      '// }',
      '// the end',
      'await done(); // a comment, not output',
      "console.log('last'); // last",
    ].join('\n');
    assert.deepEqual(shownOutput(example), ['1', '{', '  a: 1,', '', '  b: [ 2 ]', '}', 'the end', 'last']);
  });

  it('refuses a console.log whose output no comment shows', () => {
    assert.throws(
      () => shownOutput('console.log(d);\nawait next();'),
      /console\.log with no comment showing its output: console\.log\(d\);/,
    );
  });

  it('matches a line exactly, … standing for text within that line alone', () => {
    assert.ok(sameLine('{ allowed: true, resetAfterMs: 41250 }', '{ allowed: true, resetAfterMs: … }'));
    assert.ok(sameLine('a.b (c)', 'a.b (c)'));
    assert.ok(!sameLine('a.b  (c)', 'a.b (c)'), 'spacing counts');
    assert.ok(!sameLine('axb (c)', 'a.b (c)'), 'a dot is a dot');
    assert.ok(!sameLine('{ allowed: true, resetAfterMs: 5, policies: [] }', '{ allowed: true, resetAfterMs: … }x'));
    assert.ok(!sameLine('true 4 extra', 'true 4'));
  });
});
