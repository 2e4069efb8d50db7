import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { callKeys } from '../../src/core/keys.js';
import type { EnginePolicy } from '../../src/engine/algorithm.js';
import { scriptArgs, scriptFor, type Op } from '../../src/engine/driver.js';
import { decodeReply } from '../../src/engine/reply.js';
import type { Script } from '../../src/engine/script.js';
import { redisStore } from '../../src/index.js';

/**
 * One call of a single policy's script on key 'k' through a Redis store, with the time Redis used;
 * `script` is the policy's own unless given (another form of it, say).
 */
export async function callScript(
  redis: Redis,
  policy: EnginePolicy,
  prefix: string,
  op: Op,
  cost = 1,
  script: Script = scriptFor([policy.kind]),
) {
  const args = scriptArgs({ op, cost, target: 0, ms: 0, penalty: { strikes: 0, blockMs: 0 }, policies: [policy] });
  const reply = decodeReply(await redisStore(redis).run(script, callKeys(prefix, 'k', [policy]), args));
  return {
    reply,
    now: reply.nowMs,
    /** The policy's part, which a limit or peek replies with (a refund does not). */
    get part() {
      const [part] = reply.policies;
      assert.ok(part, "a limit or peek replies with the policy's part");
      return part;
    },
  };
}
