import { InvalidOptionError } from '../core/errors.js';
import type { Arg } from '../engine/script.js';
import type { MemoryInfo } from './eviction.js';

/**
 * The few commands sluice needs. This file is the one place that knows how ioredis (and its fork
 * iovalkey), node-redis, valkey-glide and @upstash/redis spell them; each client, standalone or
 * cluster, is recognised by its public methods alone.
 */
export interface Evaluator {
  evalsha(sha: string, keys: readonly string[], args: readonly Arg[]): Promise<unknown>;
  eval(lua: string, keys: readonly string[], args: readonly Arg[]): Promise<unknown>;
}

export interface ScriptClient extends Evaluator {
  /** The same, replying with a Buffer where Redis replies with a string, if the client can. */
  readonly binary: Evaluator | undefined;
  /** The server's INFO memory, where the client can ask for it. */
  readonly memoryInfo: MemoryInfo | undefined;
}

/** ioredis and iovalkey: `Redis` and `Cluster` (lower-case `evalsha`, keys and args spread after their count). */
interface IoRedisLike {
  evalsha(sha: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  eval(lua: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  evalshaBuffer?(sha: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  evalBuffer?(lua: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  info?(section: string): Promise<string>;
}

/** node-redis: `createClient()` and `createCluster()` (camel-case `evalSha`, keys and args in an object). */
interface NodeRedisLike {
  evalSha(sha: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  eval(lua: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  /** node-redis 5 and later: the same client, with some reply types read as another. */
  withTypeMapping?(mapping: Record<number, unknown>): NodeRedisLike;
  info?(section: string): Promise<string>;
}

/**
 * valkey-glide: `GlideClient` and `GlideClusterClient`. Any command goes by `customCommand`, which
 * on a cluster sends EVALSHA and EVAL to the node that owns their first key. Its own script API
 * (`invokeScript`) only tells it apart: it would run a second NOSCRIPT fallback beside this file's.
 */
interface GlideLike {
  customCommand(args: string[], options?: { decoder?: number; route?: 'randomNode' }): Promise<unknown>;
  invokeScript(...args: never[]): unknown;
}

/**
 * @upstash/redis: `Redis`, Redis over HTTP (keys and args as arrays). It spells `evalsha` and `eval`
 * as ioredis does: its `createScript` tells it apart.
 */
interface UpstashLike {
  evalsha(sha: string, keys: string[], args: string[]): Promise<unknown>;
  eval(lua: string, keys: string[], args: string[]): Promise<unknown>;
  createScript(...args: never[]): unknown;
}

// RESP's marker of a bulk string ('$'), which is what node-redis's RESP_TYPES.BLOB_STRING names.
const BULK_STRING = 36;

// glide's Decoder.Bytes: bulk strings as Buffers (its default, Decoder.String, decodes them as UTF-8).
const GLIDE_BYTES = 0;

/**
 * A client redisStore accepts: an ioredis or iovalkey Redis or Cluster, a node-redis client or
 * cluster, a valkey-glide GlideClient or GlideClusterClient, or an @upstash/redis Redis.
 */
export type RedisClient = IoRedisLike | NodeRedisLike | GlideLike | UpstashLike;

function hasMethods(client: unknown, ...names: string[]): boolean {
  return (
    typeof client === 'object' &&
    client !== null &&
    names.every((name) => typeof (client as Record<string, unknown>)[name] === 'function')
  );
}

/**
 * Rethrows a client's error as one whose message is the server's reply, where the client reworded
 * it (`reply` gives the server's words, or undefined), with the client's error as its cause: the
 * rest of this file reads replies (NOSCRIPT, LATE, ACL refusals) as the server words them.
 */
function inServerWords(reply: (message: string) => string | undefined): (error: unknown) => never {
  return (error) => {
    const words = error instanceof Error ? reply(error.message) : undefined;
    throw words === undefined ? error : new Error(words, { cause: error });
  };
}

// glide names the error codes its core knows by kind ("An error was signalled by the server: -
// NoScriptError: No matching script..."), and writes others as "CODE: text" (sluice's own LATE).
// The kinds whose codes this file reads:
const GLIDE_KINDS: Readonly<Record<string, string>> = {
  ResponseError: 'ERR',
  NoScriptError: 'NOSCRIPT',
  PermissionDenied: 'NOPERM',
};

function glideReply(message: string): string | undefined {
  const known = /^An error was signalled by the server: - (\w+): ([\s\S]*)$/.exec(message);
  if (known) {
    const code = GLIDE_KINDS[known[1] ?? ''];
    return code === undefined ? undefined : `${code} ${known[2]}`;
  }
  const other = /^([A-Z]+): ([\s\S]*)$/.exec(message);
  return other ? `${other[1]} ${other[2]}` : undefined;
}

// @upstash/redis gives the server's error after "Command failed: " when the command went in an
// auto-pipeline, and before ", command was: <the whole command as JSON>" when it went alone.
const UPSTASH_PIPELINED = 'Command failed: ';
const UPSTASH_COMMAND = ', command was: ';

function upstashReply(message: string): string | undefined {
  const start = message.startsWith(UPSTASH_PIPELINED) ? UPSTASH_PIPELINED.length : 0;
  const end = message.indexOf(UPSTASH_COMMAND);
  return start === 0 && end < 0 ? undefined : message.slice(start, end < 0 ? undefined : end);
}

function ioRedisEvaluator(evalsha: IoRedisLike['evalsha'], evaluate: IoRedisLike['eval']): Evaluator {
  return {
    evalsha: (sha, keys, args) => evalsha(sha, keys.length, ...keys, ...args.map(String)),
    eval: (lua, keys, args) => evaluate(lua, keys.length, ...keys, ...args.map(String)),
  };
}

function nodeRedisEvaluator(c: NodeRedisLike): Evaluator {
  return {
    evalsha: (sha, keys, args) => c.evalSha(sha, { keys: [...keys], arguments: args.map(String) }),
    eval: (lua, keys, args) => c.eval(lua, { keys: [...keys], arguments: args.map(String) }),
  };
}

function glideEvaluator(c: GlideLike, decoder?: number): Evaluator {
  const rethrow = inServerWords(glideReply);
  const send = (command: string, script: string, keys: readonly string[], args: readonly Arg[]) =>
    c.customCommand([command, script, String(keys.length), ...keys, ...args.map(String)], { decoder }).catch(rethrow);
  return {
    evalsha: (sha, keys, args) => send('EVALSHA', sha, keys, args),
    eval: (lua, keys, args) => send('EVAL', lua, keys, args),
  };
}

function upstashEvaluator(c: UpstashLike): Evaluator {
  const rethrow = inServerWords(upstashReply);
  return {
    evalsha: (sha, keys, args) => c.evalsha(sha, [...keys], args.map(String)).catch(rethrow),
    eval: (lua, keys, args) => c.eval(lua, [...keys], args.map(String)).catch(rethrow),
  };
}

const ACCEPTED_CLIENTS =
  'an ioredis or iovalkey client (Redis or Cluster), a node-redis client (createClient or createCluster), ' +
  'a valkey-glide client (GlideClient or GlideClusterClient) or an @upstash/redis Redis';

export function scriptClient(client: unknown): ScriptClient {
  if (hasMethods(client, 'customCommand', 'invokeScript')) {
    const c = client as GlideLike;
    return {
      ...glideEvaluator(c),
      binary: glideEvaluator(c, GLIDE_BYTES),
      // A cluster's INFO is asked of one node, as ioredis and node-redis clusters ask it.
      memoryInfo: () => c.customCommand(['INFO', 'memory'], { route: 'randomNode' }).then(String),
    };
  }
  if (hasMethods(client, 'evalsha', 'eval', 'createScript')) {
    return {
      ...upstashEvaluator(client as UpstashLike),
      // The REST API hands every string over as UTF-8 text, which a packed (binary) reply is not.
      binary: undefined,
      // Upstash's eviction is a setting of the database (docs/reliability.md, "Eviction"), not
      // something INFO is known to report; and every command over REST is a billed request.
      memoryInfo: undefined,
    };
  }
  if (hasMethods(client, 'evalsha', 'eval')) {
    const c = client as IoRedisLike;
    const binary = hasMethods(c, 'evalshaBuffer', 'evalBuffer');
    return {
      ...ioRedisEvaluator(c.evalsha.bind(c), c.eval.bind(c)),
      binary: binary ? ioRedisEvaluator(c.evalshaBuffer!.bind(c), c.evalBuffer!.bind(c)) : undefined,
      memoryInfo: c.info ? () => c.info!('memory') : undefined,
    };
  }
  if (hasMethods(client, 'evalSha', 'eval')) {
    const c = client as NodeRedisLike;
    return {
      ...nodeRedisEvaluator(c),
      // node-redis 4 has no type mapping: its batches reply as a RESP array.
      binary: c.withTypeMapping ? nodeRedisEvaluator(c.withTypeMapping({ [BULK_STRING]: Buffer })) : undefined,
      memoryInfo: c.info ? () => c.info!('memory') : undefined,
    };
  }
  throw new InvalidOptionError('client', client, ACCEPTED_CLIENTS);
}

// Cluster clients say so publicly: ioredis and iovalkey with `isCluster`, node-redis with its slot
// lookup, glide with its routed script call.
export function isCluster(client: unknown): boolean {
  return (
    (client as { isCluster?: unknown }).isCluster === true ||
    hasMethods(client, 'getSlotMaster') ||
    hasMethods(client, 'invokeScriptWithRoute')
  );
}
