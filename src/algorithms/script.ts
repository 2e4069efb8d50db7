import { createHash } from 'node:crypto';
import type { Entry, Reply, Script, Write } from '../core/types.js';

// Every script starts here: the time comes from the Redis server (never the app's clock), and
// ARGV[1] and ARGV[2] are the cost and the peek flag for every algorithm.
const PRELUDE = `local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local cost = tonumber(ARGV[1])
local peek = ARGV[2] == '1'
`;

/** A script's Lua body (after the prelude) and its TypeScript twin, with the SHA computed from the text. */
export function defineScript<V>(
  name: string,
  body: string,
  twin: (now: number, entries: readonly (Entry<V> | undefined)[], args: readonly number[]) => {
    reply: Reply;
    writes: readonly Write<V>[];
  },
): Script {
  const lua = `-- sluice ${name}\n${PRELUDE}${body}`;
  return {
    name,
    lua,
    sha: createHash('sha1').update(lua).digest('hex'),
    twin: twin as Script['twin'],
  };
}

/** The reply every script returns, built the same way in the twins as in Lua. */
export function reply(allowed: boolean, remaining: number, resetAfterMs: number, retryAfterMs: number, now: number): Reply {
  return [allowed ? 1 : 0, Math.max(0, remaining), resetAfterMs, retryAfterMs, now];
}
