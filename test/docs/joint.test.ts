import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { examplesOf, runExample } from '../support/examples.js';

describe('docs/joint.md', () => {
  it('its example runs as written and prints what its comments say', async () => {
    const examples = await examplesOf('docs/joint.md');
    assert.equal(examples.length, 1);
    await runExample('docs/joint.md example', examples[0] ?? '', {});
  });
});
