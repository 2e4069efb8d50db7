/**
 * sluice's metrics in Prometheus: an HTTP server limited per client address, whose /metrics
 * Prometheus scrapes. Run it with `npx tsx examples/metrics-prometheus.ts` (REDIS_URL to use a
 * Redis, else memory), then `curl localhost:9464/` a few times and `curl localhost:9464/metrics`.
 * In your app, import from 'sluice' instead of '../src/index.js'.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import {
  createLimiter,
  fixedWindow,
  memoryStore,
  observe,
  rateLimitResponse,
  redisStore,
  type Store,
} from '../src/index.js';

export interface MetricsExample {
  /** e.g. http://127.0.0.1:9464 */
  readonly url: string;
  stop(): Promise<void>;
}

export async function startMetricsExample({
  store,
  port = 9464,
  prefix = 'example',
}: {
  store: Store;
  port?: number;
  prefix?: string;
}): Promise<MetricsExample> {
  // The exporter is a metric reader; we serve its /metrics ourselves, next to the app.
  const exporter = new PrometheusExporter({ preventServerStart: true });
  const provider = new MeterProvider({ readers: [exporter] });
  // A store outage is reported by the limiter (a process warning, or its onOutage); observe() counts it.
  const limiter = observe(createLimiter({ store, prefix, policy: fixedWindow({ limit: 5, window: '1m' }) }), {
    meter: provider.getMeter('sluice'),
  });

  const server: Server = createServer((request, response) => {
    if (request.url === '/metrics') return exporter.getMetricsRequestHandler(request, response);
    limiter.limit(request.socket.remoteAddress ?? 'unknown').then(
      (decision) => {
        const { status, headers } = rateLimitResponse(decision);
        response.writeHead(status, headers).end(status === 200 ? 'hello\n' : 'slow down\n');
      },
      () => response.writeHead(503).end('rate limiter unavailable\n'),
    );
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const address = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}`,
    async stop() {
      await new Promise((resolve) => server.close(resolve));
      await provider.shutdown();
    },
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { Redis } = await import('ioredis');
  const store = process.env.REDIS_URL ? redisStore(new Redis(process.env.REDIS_URL)) : memoryStore();
  const example = await startMetricsExample({ store });
  console.log(`limited app at ${example.url}/ and metrics at ${example.url}/metrics (Ctrl-C to stop)`);
}
