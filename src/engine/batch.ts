import { sha1Hex } from '../core/digest.js';
import { readServerTime, withoutComments } from './driver-lua.js';
import type { Arg, Script } from './script.js';
import { unpackArray } from './msgpack.js';

/** A script that runs another script once per request, in one EVALSHA. */
export interface BatchScript {
  readonly name: string;
  readonly lua: string;
  readonly sha: string;
}

// How a batch replies, each one line, so that both forms have the same lines.
const PACKED = 'Packed into one MessagePack string (cmsgpack), for clients that take a Buffer.';
const PLAIN = 'As an array, for clients that cannot take a reply as a Buffer.';

/**
 * The batch form of `script`: its setup (so the lines of both are the same, but for the first),
 * then a loop that runs the driver once per request.
 */
function batchLua(script: Script, packed: boolean): string {
  // The batch's own part keeps its first line, which tells where it begins.
  return `-- sluice batch of ${script.name}
${script.setup}-- A batch: many calls in one EVALSHA (src/engine/batch.ts, which explains it)
${withoutComments(`-- The definitions above run once; then
-- decideCall decides each request as if it had been sent alone, after the requests before it in
-- the batch, writing its reply straight into the batch's.
--   KEYS   every request's block key, request after request; then every request's other keys
--   ARGV   [1] the batch's deadline (the earliest of its requests', read as a lone call's is),
--          [2] the number of requests, then the requests, those that share their args as one
--          group: the group's number of requests, the number of keys of each (its block key
--          included), the number of args, then the args, once for all of them
--   reply  now, then for each request: the length of its reply, then its reply (decideCall's); or
--          -1 and an error message. ${packed ? PACKED : PLAIN}
-- The batch reads TIME once: it runs at one instant anyway, atomically, and names it once. A request that fails (an
-- error sluice did not foresee: state never fails one, it heals) fails alone: pcall keeps the
-- others going, as separate calls would. A group's args are sent once, since Redis pays for every
-- argument of a command (docs/performance.md), and its requests share their KEYS and ARGV tables
-- too (the driver only reads them). Most keys are never blocked: one EXISTS of every request's
-- block key costs less than each request's GET of its own, which it saves unless one exists.
${readServerTime('ARGV[1] + 0')}
local requests = ARGV[2] + 0
unblocked = redis.call('EXISTS', unpack(KEYS, 1, requests)) == 0
local out, n = {now}, 1
local r, k, a = 0, requests, 3
while a <= #ARGV do
  local count, nk, na = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local args = {unpack(ARGV, a + 3, a + 2 + na)}
  for _ = 1, count do
    r = r + 1
    local ok, length = pcall(decideCall, KEYS[r], KEYS, k, args, now, out, n + 1)
    if ok then
      out[n + 1] = length
      n = n + 1 + length
    else
      out[n + 1], out[n + 2] = -1, type(length) == 'table' and length.err or tostring(length)
      n = n + 2
      -- What the failed request wrote of its reply is not part of the batch's. It may have holes
      -- (its header is written last), so # could stop short of them: maxn finds the last.
      for i = n + 1, table.maxn(out) do out[i] = nil end
    end
    k = k + nk - 1
  end
  a = a + 3 + na
end
return ${packed ? 'cmsgpack.pack(out)' : 'out'}
`)}`;
}

const batchScripts = { packed: new WeakMap<Script, BatchScript>(), plain: new WeakMap<Script, BatchScript>() };

/** The batch form of a script, its reply packed or not, built once per script. */
export function batchScript(script: Script, packed: boolean): BatchScript {
  const built = packed ? batchScripts.packed : batchScripts.plain;
  let batch = built.get(script);
  if (batch === undefined) {
    const lua = batchLua(script, packed);
    batch = { name: `batch of ${script.name}`, lua, sha: sha1Hex(lua) };
    built.set(script, batch);
  }
  return batch;
}

/** One request waiting for its batch. */
export interface Request {
  /** Its block key first, then its other keys (as a lone call sends them). */
  readonly keys: readonly string[];
  readonly args: readonly Arg[];
  /** Takes its reply, unchecked. */
  settle(reply: unknown): void;
  fail(error: unknown): void;
}

/** A batch as the batch script reads it, and its requests in the order it runs (and replies to) them. */
export function batchArguments(
  requests: readonly Request[],
  deadline: string,
): { keys: string[]; args: string[]; order: readonly Request[] } {
  // Requests of one limiter usually share one args array: found by identity, the group costs
  // nothing to find. Other requests with equal args join it by their text.
  const byArgs = new Map<readonly Arg[], Request[]>();
  const groups = new Map<string, Request[]>();
  // A block key for each request, then the others.
  let keyCount = requests.length;
  for (const request of requests) {
    keyCount += Math.max(0, request.keys.length - 1);
    let group = byArgs.get(request.args);
    if (group === undefined) {
      const signature = `${request.keys.length} ${request.args.join(' ')}`;
      group = groups.get(signature);
      if (group === undefined) groups.set(signature, (group = []));
      byArgs.set(request.args, group);
    }
    group.push(request);
  }
  // Every block key, then every other key, each request's in the order the batch runs them.
  const keys = new Array<string>(keyCount);
  let block = 0;
  let other = requests.length;
  const args: string[] = [deadline, String(requests.length)];
  const order: Request[][] = [];
  for (const group of groups.values()) {
    const [first] = group;
    if (first === undefined) continue;
    args.push(String(group.length), String(first.keys.length), String(first.args.length));
    for (const arg of first.args) args.push(String(arg));
    for (const request of group) {
      const requestKeys = request.keys;
      keys[block++] = requestKeys[0] ?? '';
      for (let i = 1; i < requestKeys.length; i++) keys[other++] = requestKeys[i] as string;
    }
    order.push(group);
  }
  return { keys, args, order: order.length === 1 ? (order[0] as Request[]) : order.flat() };
}

/**
 * Hands each request (in the batch's order) its own part of the batch script's reply, packed or
 * not: its reply, or its error. Returns the batch's time, which every reply names, if it has one.
 */
export function settle(
  requests: readonly Request[],
  raw: unknown,
  error: (message: string) => Error,
): number | undefined {
  let flat: readonly unknown[] = [];
  try {
    if (Array.isArray(raw)) flat = raw;
    // A packed reply is a Buffer, from a Node client; a runtime without Buffer (a Worker) has none.
    else if (typeof Buffer === 'function' && Buffer.isBuffer(raw)) flat = unpackArray(raw);
  } catch (unreadable) {
    const failure = error(`the batch script's reply could not be read: ${(unreadable as Error).message}`);
    for (const request of requests) request.fail(failure);
    return undefined;
  }
  const now = flat[0];
  let at = 1;
  for (let index = 0; index < requests.length; index++) {
    const request = requests[index] as Request;
    const length = flat[at];
    if (typeof now === 'number' && typeof length === 'number' && length >= 0) {
      // A lone call's reply: the batch's now, then the request's own.
      const reply = new Array<unknown>(1 + length);
      reply[0] = now;
      for (let i = 1; i <= length; i++) reply[i] = flat[at + i];
      request.settle(reply);
      at += 1 + length;
    } else if (length === -1) {
      request.fail(error(String(flat[at + 1])));
      at += 2;
    } else {
      // Past a malformed part nothing can be attributed to a request: all the rest fail.
      const failure = error(`the batch script replied ${JSON.stringify(flat)}`);
      for (const rest of requests.slice(index)) rest.fail(failure);
      break;
    }
  }
  return typeof now === 'number' ? now : undefined;
}
