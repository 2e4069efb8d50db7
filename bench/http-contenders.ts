/** The HTTP servers under test: which framework, which limiter (if any), which store. */

export type Framework = 'express' | 'fastify' | 'node:http';
export type LimiterLibrary = 'sluice' | 'express-rate-limit' | '@fastify/rate-limit' | 'rate-limiter-flexible';
export type StoreKind = 'redis' | 'memory';

/** What one server process runs; its JSON is the server's command-line argument. */
export interface ServerConfig {
  readonly framework: Framework;
  /** Absent: no limiter at all, the framework's ceiling. */
  readonly limiter?: LimiterLibrary;
  readonly store?: StoreKind;
  /** The private Redis, for the Redis store. */
  readonly redisUrl?: string;
  /** ioredis `enableAutoPipelining` (default off, ioredis's default, for every contender). */
  readonly autoPipelining?: boolean;
}

/**
 * Every contender's policy: a fixed window so generous that nobody is denied, so every request
 * does the same work (count, write, headers) whoever serves it; an hour, so no key expires in a run.
 */
export const HTTP_POLICY = { limit: 1_000_000_000, windowSeconds: 3600 } as const;

/** Each client's address arrives as the one hop appended by the proxy every server trusts. */
export const TRUSTED_PROXY_HOPS = 1;

export const FRAMEWORKS: readonly Framework[] = ['express', 'fastify', 'node:http'];

const PEERS: Record<Framework, readonly LimiterLibrary[]> = {
  express: ['express-rate-limit', 'rate-limiter-flexible'],
  fastify: ['@fastify/rate-limit', 'rate-limiter-flexible'],
  'node:http': ['rate-limiter-flexible'],
};

/** The peers a framework's sluice middleware is compared with (every limiter made for it, and RLF). */
export function peersOf(framework: Framework): readonly LimiterLibrary[] {
  return PEERS[framework];
}

/** Every server of one framework: its ceiling, then on each store sluice (on Redis also auto-pipelined) and each peer. */
export function serversOf(framework: Framework): ServerConfig[] {
  return [
    { framework },
    { framework, limiter: 'sluice', store: 'redis' },
    { framework, limiter: 'sluice', store: 'redis', autoPipelining: true },
    ...PEERS[framework].map((limiter): ServerConfig => ({ framework, limiter, store: 'redis' })),
    { framework, limiter: 'sluice', store: 'memory' },
    ...PEERS[framework].map((limiter): ServerConfig => ({ framework, limiter, store: 'memory' })),
  ];
}

const LIBRARY_NAMES: Record<LimiterLibrary, Record<StoreKind, string>> = {
  sluice: { redis: 'sluice redisStore', memory: 'sluice memoryStore' },
  'express-rate-limit': { redis: 'express-rate-limit + rate-limit-redis', memory: 'express-rate-limit MemoryStore' },
  '@fastify/rate-limit': { redis: '@fastify/rate-limit + Redis', memory: '@fastify/rate-limit LocalStore' },
  'rate-limiter-flexible': {
    redis: 'rate-limiter-flexible RateLimiterRedis',
    memory: 'rate-limiter-flexible RateLimiterMemory',
  },
};

/** e.g. 'sluice redisStore', 'sluice redisStore, autopipelining', 'express-rate-limit + rate-limit-redis', 'no limiter'. */
export function limiterName(config: ServerConfig): string {
  if (config.limiter === undefined) return 'no limiter';
  const name = LIBRARY_NAMES[config.limiter][config.store ?? 'redis'];
  return config.autoPipelining ? `${name}, autopipelining` : name;
}

/** e.g. 'express: sluice redisStore'. */
export function serverName(config: ServerConfig): string {
  return `${config.framework}: ${limiterName(config)}`;
}
