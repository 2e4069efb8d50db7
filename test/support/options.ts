import assert from 'node:assert/strict';
import { InvalidOptionError } from '../../src/index.js';

/** Asserts that `build` throws InvalidOptionError naming `option` and showing the bad value. */
export function rejectsOption(build: () => unknown, option: string, shown: string): void {
  assert.throws(build, (error: unknown) => {
    assert.ok(error instanceof InvalidOptionError, String(error));
    assert.equal(error.code, 'SLUICE_INVALID_OPTION');
    assert.equal(error.option, option);
    assert.match(error.message, new RegExp(`"${option}"`));
    assert.ok(error.message.includes(shown), `${error.message} should show ${shown}`);
    assert.equal(error.docs, 'docs/errors.md#sluice_invalid_option');
    return true;
  });
}
