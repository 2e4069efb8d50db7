import assert from 'node:assert/strict';
import { STATUS_CODES } from 'node:http';
import { describe, it } from 'node:test';
import { rateLimitProblem } from '../../src/http/problem.js';

describe('the problem body of a denial', () => {
  it("titles every error status with node:http's reason phrase", () => {
    for (let status = 400; status < 600; status++) {
      if (status === 503) continue;
      const title = rateLimitProblem(status, []).title;
      assert.equal(title, `${STATUS_CODES[status] ?? `Error ${status}`}: the quota of this client is exceeded`);
    }
  });
});
