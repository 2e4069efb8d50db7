import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { memoryStore, redisStore, type KeyDisplay, type Store } from '../../index.js';
import { parseDuration } from '../../core/duration.js';
import {
  EXIT,
  REDIS_HELP,
  UsageError,
  redisOption,
  redisUrlOf,
  prefixOf,
  validFlag,
  type CliIo,
  type Command,
  type ParsedCommand,
} from '../command.js';
import { maskPassword, parseRedisUrl } from '../connect.js';
import { Certificates } from '../../serve/tls.js';
import { runWorkers, serviceWorker, WORKER_ENV } from '../../serve/workers.js';
import type { ServeOptions } from '../../serve/server.js';

const HELP = `Usage: sluice serve --config <file or directory> [options]

Runs a rate-limit service: Envoy's RateLimitService (envoy.service.ratelimit.v3) over gRPC, and
POST /json, GET /healthcheck, /metrics and /rlconfig over HTTP, deciding by an envoyproxy/ratelimit
YAML configuration (with sluice's algorithms and windows; see docs/service.md). Any number of
instances on one Redis or Redis Cluster admit exactly the limit together. SIGTERM or SIGINT: stop
taking calls, answer those in flight, exit 0. SIGHUP, or a change to the configuration: reload it
(a bad one is refused, and the previous one keeps serving); SIGHUP rereads the TLS certificates too.
With --workers, the signals act on every worker. See docs/service-operations.md.

Options:
  --config <path>           a YAML file, or a directory of them (merged per domain); required
  ${REDIS_HELP}; without either, the memory store (one instance only)
  --cluster <url,url,...>   a Redis Cluster, by some of its nodes
  --grpc-port <port>        default 8081
  --http-port <port>        default 8080
  --host <address>          the address both listen on (default 0.0.0.0)
  --prefix <prefix>         the key prefix in Redis (default: sluice)
  --shadow                  global shadow mode: count, but always answer OK
  --response-headers        add the draft-11 RateLimit-Policy and RateLimit headers to the responses
  --response-dynamic-metadata
                            answer with dynamic_metadata: the request and the admitting rules' metadata
  --on-store-error <mode>   allow (default) or deny while Redis fails or is slower than --timeout
  --timeout <duration>      how long a decision waits for Redis (default 1s)
  --denied-cache <keys>     answer descriptors certain to be denied from memory, for up to this many keys
  --penalty <n>/<duration>  after n denials in a row, block the descriptor for the duration (e.g. 5/10m)
  --no-watch                do not reload the configuration when it changes
  --workers <n|auto>        serve from n processes on the same ports (auto: one per core; default 1);
                            needs --redis or --cluster
  --tls-cert <file>         serve both ports over TLS with this PEM certificate (chain)...
  --tls-key <file>          ...and its PEM private key (both or neither)
  --tls-client-ca <file>    require client certificates signed by this PEM CA (mutual TLS)
  --dashboard               serve the live dashboard at /dashboard on the HTTP port, to loopback
                            clients only, or to any with $SLUICE_DASHBOARD_TOKEN as a bearer token
  --dashboard-keys <mode>   show keys as they are (plain, the default), truncated, or hashed (hash)
  -h, --help                show this help

Examples:
  sluice serve --config ratelimit.yaml
  sluice serve --config /etc/ratelimit/config --redis redis://10.0.0.5:6379 --response-headers
  sluice serve --config ratelimit.yaml --dashboard --dashboard-keys hash
  sluice serve --config rules/ --cluster redis://10.0.0.1:7000,redis://10.0.0.2:7000 --on-store-error deny
  sluice serve --config rules/ --redis redis://10.0.0.5:6379 --workers auto \\
    --tls-cert server.pem --tls-key server-key.pem --tls-client-ca clients-ca.pem`;

/** --denied-cache and --penalty, as createServer takes them. */
function libraryOptions(parsed: ParsedCommand): {
  deniedCache?: { maxKeys: number };
  penalty?: { after: number; block: number };
} {
  const options: { deniedCache?: { maxKeys: number }; penalty?: { after: number; block: number } } = {};
  const maxKeys = parsed.values['denied-cache'];
  if (typeof maxKeys === 'string') {
    if (!/^[1-9]\d*$/.test(maxKeys))
      throw new UsageError(
        `sluice serve: --denied-cache must be a whole number of keys; got ${JSON.stringify(maxKeys)}`,
      );
    options.deniedCache = { maxKeys: Number(maxKeys) };
  }
  const penalty = parsed.values.penalty;
  if (typeof penalty === 'string') {
    const [, after, block] = /^([1-9]\d*)\/(.+)$/.exec(penalty) ?? [];
    if (after === undefined || block === undefined)
      throw new UsageError(
        `sluice serve: --penalty must be <denials>/<duration>, such as 5/10m; got ${JSON.stringify(penalty)}`,
      );
    options.penalty = {
      after: Number(after),
      block: validFlag('--penalty', penalty, () => parseDuration('block', block)),
    };
  }
  return options;
}

/** --tls-cert, --tls-key and --tls-client-ca, as createServer's `tls`. */
function tlsOf(parsed: ParsedCommand): { tls?: { cert: string; key: string; clientCa?: string } } {
  const file = (flag: string) => {
    const value = parsed.values[flag];
    if (value === '') throw new UsageError(`sluice serve: --${flag} needs a file`);
    return typeof value === 'string' ? value : undefined;
  };
  const [cert, key, clientCa] = [file('tls-cert'), file('tls-key'), file('tls-client-ca')];
  if (cert === undefined && key === undefined) {
    if (clientCa !== undefined) throw new UsageError('sluice serve: --tls-client-ca needs --tls-cert and --tls-key');
    return {};
  }
  if (cert === undefined || key === undefined)
    throw new UsageError(
      `sluice serve: --tls-cert and --tls-key go together; got ${cert === undefined ? '--tls-key' : '--tls-cert'} alone`,
    );
  return { tls: { cert, key, ...(clientCa === undefined ? {} : { clientCa }) } };
}

const MOST_WORKERS = 1024;

/** --workers: a count, or auto for one per core; refused on the memory store beyond one. */
function workersOf(parsed: ParsedCommand, io: CliIo): number {
  const value = parsed.values.workers;
  if (typeof value !== 'string') return 1;
  const count = value === 'auto' ? availableParallelism() : Number(value);
  if (value !== 'auto' && (!/^[1-9]\d*$/.test(value) || count > MOST_WORKERS))
    throw new UsageError(
      `sluice serve: --workers must be auto or a number from 1 to ${MOST_WORKERS}; got ${JSON.stringify(value)}`,
    );
  if (count > 1 && typeof parsed.values.cluster !== 'string' && redisUrlOf(parsed, io) === undefined)
    throw new UsageError(
      `sluice serve: --workers ${value} (${count} processes) needs --redis or --cluster: on the memory store each worker would admit the whole limit`,
    );
  return count;
}

/** --dashboard and --dashboard-keys, and the token in SLUICE_DASHBOARD_TOKEN, as createServer takes them. */
function dashboardOf(parsed: ParsedCommand, io: CliIo): { dashboard?: { keys?: KeyDisplay; token?: string } } {
  const keys = parsed.values['dashboard-keys'];
  if (parsed.values.dashboard !== true) {
    if (keys !== undefined) throw new UsageError('sluice serve: --dashboard-keys needs --dashboard');
    return {};
  }
  if (keys !== undefined && keys !== 'plain' && keys !== 'truncate' && keys !== 'hash')
    throw new UsageError(`sluice serve: --dashboard-keys must be plain, truncate or hash; got ${JSON.stringify(keys)}`);
  const token = io.env.SLUICE_DASHBOARD_TOKEN;
  return { dashboard: { ...(keys === undefined ? {} : { keys }), ...(token ? { token } : {}) } };
}

/** The flags that pass to createServer as they are read. */
function serveFlags(parsed: ParsedCommand): Partial<ServeOptions> {
  const onStoreError = parsed.values['on-store-error'];
  if (onStoreError !== undefined && onStoreError !== 'allow' && onStoreError !== 'deny')
    throw new UsageError(`sluice serve: --on-store-error must be allow or deny; got ${JSON.stringify(onStoreError)}`);
  const grpcPort = portOf(parsed, 'grpc-port');
  const httpPort = portOf(parsed, 'http-port');
  const prefix = prefixOf(parsed);
  const given = parsed.values.timeout;
  const timeout =
    typeof given === 'string' ? validFlag('--timeout', given, () => parseDuration('timeout', given)) : undefined;
  return {
    ...(grpcPort === undefined ? {} : { grpcPort }),
    ...(httpPort === undefined ? {} : { httpPort }),
    ...(typeof parsed.values.host === 'string' ? { host: parsed.values.host } : {}),
    ...(prefix === undefined ? {} : { prefix }),
    ...(onStoreError === undefined ? {} : { onStoreError }),
    ...(timeout === undefined ? {} : { timeout }),
    ...libraryOptions(parsed),
    shadow: parsed.values.shadow === true,
    responseHeaders: parsed.values['response-headers'] === true,
    watch: parsed.values['no-watch'] !== true,
  };
}

function portOf(parsed: ParsedCommand, flag: string): number | undefined {
  const value = parsed.values[flag];
  if (typeof value !== 'string') return undefined;
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65535)
    throw new UsageError(`sluice serve: --${flag} must be a port from 0 to 65535; got ${JSON.stringify(value)}`);
  return port;
}

interface Connected {
  readonly store: Store;
  readonly description: string;
  close(): Promise<void>;
}

function importIoredis() {
  return import('ioredis').catch(() => {
    throw new Error('sluice serve: talks to Redis through ioredis; install it: npm install ioredis');
  });
}

/**
 * A client for a long-running service: it reconnects after an outage, and meanwhile fails calls
 * at once (no offline queue), so each is answered by the failure policy instead of waiting.
 */
const SERVICE_CLIENT = {
  enableOfflineQueue: false,
  enableReadyCheck: false,
  maxRetriesPerRequest: 0,
  retryStrategy: (attempt: number) => Math.min(attempt * 100, 2000),
} as const;

/** Resolves once the client is ready, or rejects with the first error (a service must start on a working Redis). */
function ready(client: import('ioredis').Redis | import('ioredis').Cluster, where: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const fail = (error: Error) => {
      client.disconnect();
      reject(new Error(`sluice serve: cannot connect to Redis at ${where}: ${error.message}`));
    };
    client.once('error', fail);
    client.once('ready', () => {
      client.off('error', fail);
      // Later errors are outages, answered by the failure policy; the client reconnects.
      client.on('error', () => undefined);
      resolve();
    });
  });
}

async function connect(parsed: ParsedCommand, io: CliIo): Promise<Connected> {
  const cluster = parsed.values.cluster;
  const given = redisUrlOf(parsed, io);
  if (typeof cluster === 'string' && typeof parsed.values.redis === 'string')
    throw new UsageError('sluice serve: give --redis or --cluster, not both');
  if (typeof cluster === 'string') {
    const urls = cluster.split(',').map((text) => parseRedisUrl(text.trim(), '--cluster'));
    const ioredis = await importIoredis();
    const description = `Redis Cluster ${urls.map(maskPassword).join(', ')}`;
    const client = new ioredis.Cluster(
      urls.map((url) => ({ host: url.hostname, port: Number(url.port || 6379) })),
      {
        enableOfflineQueue: false,
        enableReadyCheck: true,
        redisOptions: {
          ...SERVICE_CLIENT,
          ...(urls[0]?.password
            ? {
                password: decodeURIComponent(urls[0].password),
                username: decodeURIComponent(urls[0].username) || undefined,
              }
            : {}),
        },
      },
    );
    await ready(client, description);
    return { store: redisStore(client), description, close: async () => void (await client.quit()) };
  }
  if (given === undefined) {
    const description =
      "this process's memory (no --redis, --cluster or REDIS_URL), so run one instance only: several would each admit the whole limit";
    return { store: memoryStore(), description, close: () => Promise.resolve() };
  }
  const url = parseRedisUrl(given.url, given.source);
  const ioredis = await importIoredis();
  const description = `Redis ${maskPassword(url)}`;
  const client = new ioredis.Redis(url.href, { ...SERVICE_CLIENT, connectTimeout: 5000 });
  await ready(client, maskPassword(url));
  return { store: redisStore(client), description, close: async () => void (await client.quit()) };
}

/** Imports a part of `sluice/serve`, or says which packages it needs. */
async function importServe<T>(part: () => Promise<T>): Promise<T> {
  try {
    return await part();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw error;
    throw new Error(`sluice serve: needs yaml: npm install yaml (${(error as Error).message})`, { cause: error });
  }
}

/** Resolves with the first of the signals that arrives. */
function firstSignal(signals: readonly NodeJS.Signals[]): { arrived: Promise<NodeJS.Signals>; stop(): void } {
  let stop = () => undefined as void;
  const arrived = new Promise<NodeJS.Signals>((resolve) => {
    const handlers = signals.map((signal) => [signal, () => resolve(signal)] as const);
    handlers.forEach(([signal, handler]) => process.once(signal, handler));
    stop = () => handlers.forEach(([signal, handler]) => process.off(signal, handler));
  });
  return { arrived, stop };
}

export const serve: Command = {
  name: 'serve',
  summary: "run a rate-limit service for Envoy's gRPC API and HTTP /json",
  help: HELP,
  options: {
    config: { type: 'string' },
    cluster: { type: 'string' },
    'grpc-port': { type: 'string' },
    'http-port': { type: 'string' },
    host: { type: 'string' },
    prefix: { type: 'string' },
    shadow: { type: 'boolean' },
    'response-headers': { type: 'boolean' },
    'response-dynamic-metadata': { type: 'boolean' },
    'on-store-error': { type: 'string' },
    timeout: { type: 'string' },
    'no-watch': { type: 'boolean' },
    'denied-cache': { type: 'string' },
    penalty: { type: 'string' },
    workers: { type: 'string' },
    'tls-cert': { type: 'string' },
    'tls-key': { type: 'string' },
    'tls-client-ca': { type: 'string' },
    dashboard: { type: 'boolean' },
    'dashboard-keys': { type: 'string' },
    ...redisOption,
  },
  async run(parsed, io) {
    if (parsed.positionals.length > 0)
      throw new UsageError(
        `sluice serve: unexpected argument ${JSON.stringify(parsed.positionals[0])}; see sluice serve --help`,
      );
    const config = parsed.values.config;
    if (typeof config !== 'string' || config === '')
      throw new UsageError('sluice serve: missing --config <file or directory>; see sluice serve --help');
    const flags = serveFlags(parsed);
    // A bad config is named before gRPC loads and Redis is asked: a refusal then takes no connection,
    // and says what is wrong with the config even while Redis is down. createServer reads it again.
    const { loadConfig } = await importServe(() => import('../../serve/config.js'));
    const responseDynamicMetadata = parsed.values['response-dynamic-metadata'] === true;
    await loadConfig(config, { responseDynamicMetadata, penalty: flags.penalty !== undefined });
    const tls = tlsOf(parsed);
    const workers = workersOf(parsed, io);
    const dashboard = dashboardOf(parsed, io);
    if (workers > 1 && dashboard.dashboard)
      throw new UsageError("sluice serve: --dashboard shows one process's decisions: leave out --workers to use it");
    const worker = workers > 1 && cluster.isWorker && io.env[WORKER_ENV] === '1';
    if (workers > 1 && !worker) {
      // Read here too, so that a bad certificate is refused once, as a usage error, before any worker starts.
      if (tls.tls) await Certificates.read(tls.tls);
      return runWorkers(workers, (line) => io.err(line));
    }
    const { startServer } = await importServe(() => import('../../serve/server.js'));
    let server: Awaited<ReturnType<typeof startServer>> | undefined;
    const onHangup = () => void server?.reload();
    // A worker listens to the primary first: a stop it asks while this one starts is kept for after.
    const joined = worker ? serviceWorker(onHangup) : undefined;
    const connected = await connect(parsed, io).catch((error: unknown) => {
      joined?.leave();
      throw error;
    });
    const stopping = firstSignal(['SIGTERM', 'SIGINT']);
    const log = (line: string) => io.err(joined ? `[worker ${cluster.worker?.id}] ${line}` : line);
    try {
      server = await startServer(
        {
          config,
          store: connected.store,
          log,
          ...flags,
          ...tls,
          ...dashboard,
          responseDynamicMetadata,
        },
        joined?.peers,
      );
    } catch (error) {
      stopping.stop();
      await connected.close();
      joined?.leave();
      throw error;
    }
    if (dashboard.dashboard)
      io.err(
        `sluice serve: dashboard at ${tls.tls ? 'https' : 'http'}://${typeof parsed.values.host === 'string' ? parsed.values.host : '127.0.0.1'}:${server.httpPort}/dashboard, ${dashboard.dashboard.token ? 'for clients with the bearer token in SLUICE_DASHBOARD_TOKEN' : 'for loopback clients only'}`,
      );
    if (joined) joined.ready(connected.description);
    else io.err(`sluice serve: counting in ${connected.description}`);
    process.on('SIGHUP', onHangup);
    const why = await Promise.race([stopping.arrived, joined?.stopAsked ?? new Promise<never>(() => undefined)]);
    stopping.stop();
    process.off('SIGHUP', onHangup);
    log(`sluice serve: ${why}: answering the calls in flight, then stopping`);
    await server.close();
    await connected.close();
    log('sluice serve: stopped');
    joined?.leave();
    return EXIT.ok;
  },
};
