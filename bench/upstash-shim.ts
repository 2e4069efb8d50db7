import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

type Argument = string | number;

// Upstash's scripts begin with `#!lua flags=allow-key-locking`, a flag only Upstash's server knows:
// Redis 7.0 rejects it. Without the line the scripts run unchanged (the flag only tunes locking).
function withoutShebang(script: string): string {
  return script.startsWith('#!') ? script.slice(script.indexOf('\n') + 1) : script;
}

function sha1(text: string): string {
  return createHash('sha1').update(text).digest('hex');
}

/**
 * The two calls @upstash/ratelimit makes on its `redis` (evalsha, then eval on NOSCRIPT), served by
 * ioredis on a local Redis so that it can be measured beside the others on the same server.
 * Upstash names each script by the SHA1 of its text; Redis knows the script without the shebang
 * by another SHA1, learned on the first eval, so every later call is an EVALSHA as it would be.
 */
export function upstashRedis(redis: Redis) {
  const localSha = new Map<string, string>();
  return {
    async evalsha(hash: string, keys: readonly string[], args: readonly Argument[]): Promise<unknown> {
      const sha = localSha.get(hash);
      if (sha === undefined) throw new Error(`NOSCRIPT ${hash} has not been sent through this shim yet`);
      return redis.evalsha(sha, keys.length, ...keys, ...args);
    },
    async eval(script: string, keys: readonly string[], args: readonly Argument[]): Promise<unknown> {
      const runnable = withoutShebang(script);
      localSha.set(sha1(script), sha1(runnable));
      return redis.eval(runnable, keys.length, ...keys, ...args);
    },
  };
}
