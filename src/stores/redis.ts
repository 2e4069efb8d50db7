import { InvalidOptionError, StoreError, toStoreError } from '../core/errors.js';
import type { Reply, Script } from '../core/types.js';
import type { Store } from './store.js';

/**
 * The few commands sluice needs. This file is the one place that knows how ioredis and node-redis
 * spell them; both clients, standalone or cluster, are recognised by their public methods alone.
 */
interface ScriptClient {
  evalsha(sha: string, keys: readonly string[], args: readonly string[]): Promise<unknown>;
  eval(lua: string, keys: readonly string[], args: readonly string[]): Promise<unknown>;
  del(keys: readonly string[]): Promise<unknown>;
}

/** ioredis: `Redis` and `Cluster` (lower-case `evalsha`, keys and args spread after their count). */
interface IoRedisLike {
  evalsha(sha: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  eval(lua: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  del(...keys: string[]): Promise<unknown>;
}

/** node-redis: `createClient()` and `createCluster()` (camel-case `evalSha`, keys and args in an object). */
interface NodeRedisLike {
  evalSha(sha: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  eval(lua: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  del(keys: string[]): Promise<unknown>;
}

/** A client redisStore accepts: an ioredis Redis or Cluster, or a node-redis client or cluster. */
export type RedisClient = IoRedisLike | NodeRedisLike;

function hasMethods(client: unknown, ...names: string[]): boolean {
  return (
    typeof client === 'object' &&
    client !== null &&
    names.every((name) => typeof (client as Record<string, unknown>)[name] === 'function')
  );
}

function scriptClient(client: unknown): ScriptClient {
  if (hasMethods(client, 'evalsha', 'eval', 'del')) {
    const c = client as IoRedisLike;
    return {
      evalsha: (sha, keys, args) => c.evalsha(sha, keys.length, ...keys, ...args),
      eval: (lua, keys, args) => c.eval(lua, keys.length, ...keys, ...args),
      del: (keys) => c.del(...keys),
    };
  }
  if (hasMethods(client, 'evalSha', 'eval', 'del')) {
    const c = client as NodeRedisLike;
    return {
      evalsha: (sha, keys, args) => c.evalSha(sha, { keys: [...keys], arguments: [...args] }),
      eval: (lua, keys, args) => c.eval(lua, { keys: [...keys], arguments: [...args] }),
      del: (keys) => c.del([...keys]),
    };
  }
  throw new InvalidOptionError('client', client, 'an ioredis client (Redis or Cluster) or a node-redis client (createClient or createCluster)');
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

function toReply(raw: unknown, script: Script): Reply {
  if (Array.isArray(raw) && raw.length >= 3 && raw.every((n) => typeof n === 'number')) return raw as Reply;
  throw new StoreError(`script ${script.name} replied ${JSON.stringify(raw)}, not a list of integers`);
}

/**
 * State in Redis: each decision is one EVALSHA of the algorithm's script. The script is sent whole
 * (EVAL, which also caches it) only when Redis answers NOSCRIPT: after a restart, a failover or
 * SCRIPT FLUSH, or on a cluster node that has not seen it yet.
 */
export function redisStore(client: RedisClient): Store {
  const redis = scriptClient(client);
  return {
    async run(script, keys, args) {
      const argv = args.map(String);
      try {
        try {
          return toReply(await redis.evalsha(script.sha, keys, argv), script);
        } catch (error) {
          if (!isNoScript(error)) throw error;
          return toReply(await redis.eval(script.lua, keys, argv), script);
        }
      } catch (error) {
        throw toStoreError(error);
      }
    },
    async delete(keys) {
      if (keys.length === 0) return;
      try {
        await redis.del(keys);
      } catch (error) {
        throw toStoreError(error);
      }
    },
  };
}
