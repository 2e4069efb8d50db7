import { existsSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { startRedisServer, type RedisServer } from '../../src/cli/redis-server.js';

/** A server the tests run on. */
export interface TestServer {
  /** As test names show it: 'redis' for the redis-server on PATH, else with its version, e.g. 'valkey 8.1.1'. */
  readonly name: string;
  /** The server's command: a name on PATH or a path. */
  readonly server: string;
  /** Its cli, which creates a cluster. */
  readonly cli: string;
  /** A server of the matrix (SLUICE_SERVER), not the redis-server on PATH. */
  readonly matrix: boolean;
}

/** The servers besides the redis-server on PATH, as SLUICE_SERVER names them: what test/matrix/build.sh builds. */
export const MATRIX = ['valkey-8.1', 'redis-8.0'] as const;
export type MatrixServer = (typeof MATRIX)[number];

/** Where test/matrix/build.sh leaves each build, in a directory named by its version (valkey-8.1.1). */
const CACHE = join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'sluice', 'servers');

/** The build of `id` in the cache (its newest patch release), or undefined when there is none. */
export function cachedServer(id: MatrixServer): TestServer | undefined {
  const [kind, series] = id.split('-') as [string, string];
  const builds = (existsSync(CACHE) ? readdirSync(CACHE) : [])
    .filter((dir) => dir.startsWith(`${kind}-${series}.`) && existsSync(join(CACHE, dir, `${kind}-server`)))
    .map((dir) => ({ dir, patch: Number(dir.slice(`${kind}-${series}.`.length)) }))
    .sort((a, b) => b.patch - a.patch);
  const dir = builds[0]?.dir;
  if (dir === undefined) return undefined;
  return {
    name: `${kind} ${dir.slice(kind.length + 1)}`,
    server: join(CACHE, dir, `${kind}-server`),
    cli: join(CACHE, dir, `${kind}-cli`),
    matrix: true,
  };
}

function fromEnvironment(): TestServer {
  const id = process.env.SLUICE_SERVER;
  if (!id) return { name: 'redis', server: 'redis-server', cli: 'redis-cli', matrix: false };
  const known = MATRIX.find((server) => server === id);
  if (known === undefined) throw new Error(`SLUICE_SERVER=${id}: not one of ${MATRIX.join(', ')}`);
  const found = cachedServer(known);
  if (found === undefined) throw new Error(`SLUICE_SERVER=${id}: not built here (test/matrix/build.sh builds it)`);
  return found;
}

/**
 * The server test support starts (useRedis, clusters, Sentinels): the one SLUICE_SERVER names, from
 * the cache, or the redis-server on PATH when it is unset.
 */
export const testServer: TestServer = fromEnvironment();

/** startRedisServer on the test server. */
export function startTestServer(
  args: readonly string[] = [],
  options: { sentinel?: boolean } = {},
): Promise<RedisServer> {
  return startRedisServer(args, { ...options, command: testServer.server });
}
