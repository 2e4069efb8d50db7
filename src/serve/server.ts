import { watch } from 'node:fs';
import { stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { parseDuration } from '../core/duration.js';
import { InvalidOptionError, messageOf } from '../core/errors.js';
import { validPrefix } from '../core/keys.js';
import { optionsObject } from '../core/validate.js';
import { createLimiter, fixedWindow, type DeniedCacheOptions, type Duration, type Store } from '../index.js';
import { describeConfig, loadConfig, nodesOf, type ServeConfig } from './config.js';
import { startGrpc, stopGrpc } from './grpc.js';
import { Health } from './health.js';
import { serveDashboard, type ServeDashboard, type ServeDashboardOptions } from './dashboard.js';
import { startHttp, stopHttp, type HttpRoutes } from './http.js';
import { Certificates, tlsOptions, type SecureServer, type TlsOptions } from './tls.js';
import type { ServicePeers } from './workers.js';
import { Metrics } from './metrics.js';
import { shouldRateLimit, withCallDeadlines } from './rate-limit.js';
import type { RateLimitRequest, RateLimitResponse } from './messages.js';
import { Rules, type LimiterSettings } from './rules.js';
import { decide, type DecideOptions } from './service.js';

export interface ServeOptions {
  /** A configuration file in envoyproxy/ratelimit's YAML, or a directory of them (merged per domain). */
  config: string;
  /** Where counts live: redisStore(client) for several instances, memoryStore() for one. */
  store: Store;
  /** gRPC port (default 8081; 0 picks a free one). */
  grpcPort?: number;
  /** HTTP port for /json, /healthcheck, /metrics and /rlconfig (default 8080; 0 picks a free one). */
  httpPort?: number;
  /** The address both listen on (default '0.0.0.0'). */
  host?: string;
  /** Namespaces the service's keys in the store (default 'sluice'). */
  prefix?: string;
  /** Global shadow mode: decide and count, but always answer OK (descriptor statuses still tell). */
  shadow?: boolean;
  /** Add the draft-11 RateLimit-Policy and RateLimit headers to response_headers_to_add (default false). */
  responseHeaders?: boolean;
  /**
   * Answer with dynamic_metadata as envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA does: the
   * request, and the `metadata` of the rules that admitted it (default false; a rule's `metadata`
   * is refused without it).
   */
  responseDynamicMetadata?: boolean;
  /** Watch the configuration and reload it when it changes (default true). */
  watch?: boolean;
  /** The longest a decision waits for the store before following `onStoreError` (default '1s'). */
  timeout?: Duration;
  /** What to answer when the store fails: admit ('allow', the default) or refuse ('deny'). */
  onStoreError?: 'allow' | 'deny';
  /** Answer cost-1 requests certain to be denied from memory (see docs/performance.md). */
  deniedCache?: DeniedCacheOptions;
  /** After `after` denials in a row, block the descriptor for `block`. */
  penalty?: { after: number; block: Duration };
  /** Told, one line each, about reloads and refused configurations. */
  log?: (line: string) => void;
  /**
   * TLS on both ports from PEM files, read again by reload(); with `clientCa`, mutual TLS: a client
   * without a certificate that CA signed is refused.
   */
  tls?: TlsOptions;
  /** The live dashboard at /dashboard on the HTTP port (default off; docs/dashboard.md). */
  dashboard?: boolean | ServeDashboardOptions;
}

export interface SluiceServer {
  readonly grpcPort: number;
  readonly httpPort: number;
  /** The configuration serving now. */
  readonly config: ServeConfig;
  /**
   * Reads the configuration and the TLS certificates again; resolves true if they took effect, false
   * if one was refused (the old one serves on, and `log` is told why).
   */
  reload(): Promise<boolean>;
  /**
   * Stops: health checks answer NOT_SERVING, the gRPC port takes no more calls, then the HTTP port
   * none; resolves once every call in flight is answered. The store is the caller's to close.
   */
  close(): Promise<void>;
}

const SERVE_OPTIONS = [
  'config',
  'store',
  'grpcPort',
  'httpPort',
  'host',
  'prefix',
  'shadow',
  'responseHeaders',
  'responseDynamicMetadata',
  'watch',
  'timeout',
  'onStoreError',
  'deniedCache',
  'penalty',
  'log',
  'tls',
  'dashboard',
];
// Editors and ConfigMap updates write a file in several steps; one reload after they settle.
const RELOAD_SETTLE_MS = 100;

function port(option: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 65535)
    throw new InvalidOptionError(option, value, 'a port number from 0 to 65535');
  return value;
}

function flag(option: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new InvalidOptionError(option, value, 'true or false');
  return value;
}

/**
 * Why the service cannot serve now: its store fails, and it denies then; undefined while it can.
 * Checks the options a limiter takes, as the service's own limiters will.
 */
function storeProbe(settings: LimiterSettings): () => Promise<string | undefined> {
  const probe = createLimiter({
    ...settings,
    policy: fixedWindow({ limit: 1, window: 1000, name: 'health' }),
    onOutage: () => undefined,
  });
  // A peek writes nothing; it fails as a decision would, through the timeout and failure policy.
  return async () =>
    settings.onStoreError === 'deny' && (await probe.peek('healthcheck')).reason !== undefined
      ? 'the store is failing, and the service denies then'
      : undefined;
}

function summary(config: ServeConfig): string {
  const rules = [...config.domains.values()].reduce(
    (sum, domain) =>
      sum + [...nodesOf(domain.root)].filter((n) => n.limits.length > 0 || n.unlimited || n.denyAll).length,
    0,
  );
  return `${config.domains.size} domain${config.domains.size === 1 ? '' : 's'}, ${rules} rule${rules === 1 ? '' : 's'} from ${config.files.length} file${config.files.length === 1 ? '' : 's'}`;
}

/** Reloads `reload` when the configuration changes, once the writes settle; until close(). */
async function watchConfig(configPath: string, reload: () => unknown, log: (line: string) => void) {
  // A file is watched through its directory: editors and ConfigMaps replace it rather than write it.
  const directory = (await stat(configPath)).isDirectory() ? configPath : dirname(configPath);
  let settle: ReturnType<typeof setTimeout> | undefined;
  const watcher = watch(directory, () => {
    clearTimeout(settle);
    settle = setTimeout(reload, RELOAD_SETTLE_MS);
  });
  // The directory removed or unreadable: the rules in memory keep serving, and the watch ends.
  watcher.on('error', (error) =>
    log(`sluice serve: stopped watching ${directory} (${error.message}); the current config keeps serving`),
  );
  return {
    close() {
      watcher.close();
      clearTimeout(settle);
    },
  };
}

/** Rereads the certificates, if any; resolves false, having logged why, if the new ones are refused. */
async function reloadCertificates(certificates: Certificates | undefined, log: (line: string) => void) {
  if (certificates === undefined) return true;
  try {
    await certificates.reload();
    log('sluice serve: TLS certificates reloaded');
    return true;
  } catch (error) {
    log(`${messageOf(error)}; the certificates in use keep serving`);
    return false;
  }
}

/** createServer's options, checked. */
async function settingsOf(options: ServeOptions) {
  const o = optionsObject('createServer', options, SERVE_OPTIONS);
  if (typeof o.config !== 'string' || o.config === '')
    throw new InvalidOptionError('config', o.config, 'the path of a configuration file or directory');
  const host = o.host === undefined ? '0.0.0.0' : o.host;
  if (typeof host !== 'string' || host === '')
    throw new InvalidOptionError('host', host, 'an address such as "0.0.0.0" or "::1"');
  const dynamicMetadata = flag('responseDynamicMetadata', o.responseDynamicMetadata, false);
  if (o.onStoreError !== undefined && o.onStoreError !== 'allow' && o.onStoreError !== 'deny')
    throw new InvalidOptionError('onStoreError', o.onStoreError, "'allow' or 'deny'");
  if (o.log !== undefined && typeof o.log !== 'function')
    throw new InvalidOptionError('log', o.log, 'a function taking one line');
  if (o.timeout !== undefined) parseDuration('timeout', o.timeout);
  const tls = tlsOptions(o.tls);
  const limiter: LimiterSettings = {
    store: o.store as Store,
    prefix: validPrefix(o.prefix),
    ...(o.timeout === undefined ? {} : { timeout: o.timeout as Duration }),
    ...(o.onStoreError === undefined ? {} : { onStoreError: o.onStoreError }),
    ...(o.deniedCache === undefined ? {} : { deniedCache: o.deniedCache as DeniedCacheOptions }),
    ...(o.penalty === undefined ? {} : { penalty: o.penalty as ServeOptions['penalty'] & object }),
  };
  return {
    configPath: o.config,
    host,
    grpcPort: port('grpcPort', o.grpcPort, 8081),
    httpPort: port('httpPort', o.httpPort, 8080),
    decide: {
      shadow: flag('shadow', o.shadow, false),
      headers: flag('responseHeaders', o.responseHeaders, false),
      dynamicMetadata,
    },
    configOptions: { responseDynamicMetadata: dynamicMetadata, penalty: o.penalty !== undefined },
    watching: flag('watch', o.watch, true),
    dashboard: o.dashboard,
    log: (o.log as ServeOptions['log']) ?? (() => undefined),
    limiter,
    // Read last, so that every other option is checked before a file is.
    certificates: tls === undefined ? undefined : await Certificates.read(tls),
  };
}

/**
 * The configuration read again: its rules, or `current` when no config file changed, or undefined,
 * `log` told why, when it is refused. A watch event that changed no config file (another file in
 * the directory, one touched) keeps the rules, their limiters and denied caches, and says nothing:
 * a log written into the watched directory would otherwise reload it for ever.
 */
async function reread(
  current: Rules,
  read: () => Promise<ServeConfig>,
  rulesOf: (config: ServeConfig) => Rules,
  log: (line: string) => void,
): Promise<Rules | undefined> {
  try {
    const next = await read();
    if (next.source === current.config.source) return current;
    const rules = rulesOf(next);
    log(`sluice serve: config reloaded: ${summary(rules.config)}`);
    return rules;
  } catch (error) {
    log(`${messageOf(error)}; the change is refused and the previous config keeps serving`);
    return undefined;
  }
}

/** The HTTP port's routes, answering by the rules serving now (`rulesNow()`). */
function httpRoutes(
  rulesNow: () => Rules,
  decideOptions: DecideOptions,
  health: Health,
  peers: ServicePeers | undefined,
  dashboard: ServeDashboard | undefined,
): HttpRoutes {
  const { metrics } = decideOptions;
  return {
    decide: async (request: RateLimitRequest): Promise<RateLimitResponse> => {
      metrics.inFlight('http', 1);
      try {
        return await decide(rulesNow(), request, decideOptions);
      } finally {
        metrics.inFlight('http', -1);
      }
    },
    unhealthy: () => health.check(),
    metrics: () => (peers ? peers.metrics() : metrics.render()),
    rlconfig: () => describeConfig(rulesNow().config),
    dashboard: dashboard?.answer,
  };
}

/**
 * Starts a rate-limit service: Envoy's RateLimitService over gRPC, and /json, /healthcheck,
 * /metrics and /rlconfig over HTTP, deciding by the rules of `config`. Rejects with
 * InvalidConfigError for a bad configuration and InvalidOptionError for a bad option.
 */
export function createServer(options: ServeOptions): Promise<SluiceServer> {
  return startServer(options);
}

/**
 * createServer, as one worker of several (src/serve/workers.ts) starts it: health and /metrics
 * answer for the whole service, through `peers`.
 */
export async function startServer(options: ServeOptions, peers?: ServicePeers): Promise<SluiceServer> {
  const { configPath, host, configOptions, log, certificates, ...o } = await settingsOf(options);
  let settings = o.limiter;
  // Built first, so that a bad store, timeout, denied-cache or penalty option fails before anything listens.
  const storeFailing = storeProbe(settings);
  let closing = false;
  const own = async () => (closing ? 'the service is stopping' : await storeFailing());
  const health = new Health(peers ? () => peers.unhealthy() : storeFailing);
  const deadlines = withCallDeadlines(settings.store);
  settings = { ...settings, store: deadlines.store };
  const metrics = new Metrics();
  peers?.answer({ unhealthy: own, families: () => metrics.snapshot() });
  const dashboard = serveDashboard(o.dashboard, () => rules);
  const rulesOf = (config: ServeConfig) => new Rules(config, settings, metrics, dashboard?.recorder);
  let rules = rulesOf(await loadConfig(configPath, configOptions));

  const decideOptions = { ...o.decide, metrics, dashboard: dashboard?.recorder, callDeadlines: deadlines };
  const secure = certificates?.serverOptions();
  const grpc = await startGrpc(
    new Map([shouldRateLimit(() => rules, deadlines, decideOptions), ...health.methods()]),
    host,
    o.grpcPort,
    secure,
  );
  let http;
  try {
    const routes = httpRoutes(() => rules, decideOptions, health, peers, dashboard);
    http = await startHttp(routes, host, o.httpPort, secure);
  } catch (error) {
    health.stop();
    await stopGrpc(grpc);
    throw error;
  }
  if (certificates) [grpc.server, http.server].forEach((server) => certificates.serve(server as SecureServer));

  let reloading: Promise<boolean> = Promise.resolve(true);
  async function reloadOnce(): Promise<boolean> {
    // Requests in flight keep the rules they started with; the next ones take the new.
    const next = await reread(rules, () => loadConfig(configPath, configOptions), rulesOf, log);
    if (next === undefined || next === rules) return next !== undefined;
    const previous = rules;
    rules = next;
    // Its leases go back to the store; a call still deciding by it asks the store.
    await previous.close();
    return true;
  }
  const reloadConfig = (): Promise<boolean> => (reloading = reloading.then(reloadOnce));

  const watching = o.watching ? await watchConfig(configPath, reloadConfig, log) : undefined;
  const scheme = certificates ? ' (TLS)' : '';
  log(
    `sluice serve: ${summary(rules.config)}; gRPC${scheme} on ${host}:${grpc.port}, HTTP${scheme} on ${host}:${http.port}`,
  );

  const httpServer = http.server;
  return {
    grpcPort: grpc.port,
    httpPort: http.port,
    get config() {
      return rules.config;
    },
    async reload() {
      const [config, tls] = await Promise.all([reloadConfig(), reloadCertificates(certificates, log)]);
      return config && tls;
    },
    async close() {
      watching?.close();
      closing = true;
      // Health checks say NOT_SERVING from here on; the HTTP port answers them until gRPC's calls are done.
      health.stop();
      await stopGrpc(grpc);
      await stopHttp(httpServer);
      await reloading;
      // Every call is answered: the leases go back to the store before it is closed.
      await rules.close();
    },
  };
}
