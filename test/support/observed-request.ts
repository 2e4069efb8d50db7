/**
 * A program for the outage tests: an app on sluice/node whose limiter (on the Redis at REDIS_URL,
 * timeout 200 ms) is observed, answering one request of its own, then exiting. It prints the
 * status to stdout; whatever sluice prints goes to stderr, where the test counts it. With
 * ON_OUTAGE=log, the limiter logs outages itself instead of leaving them to the default warning.
 */
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { rateLimit } from '../../src/adapters/node.js';
import { createLimiter, fixedWindow, observe, redisStore, type StoreFailure } from '../../src/index.js';

const client = new Redis(process.env.REDIS_URL as string);
const logOutage = (failure: StoreFailure) => console.error(`rate limiter store down: ${failure.error.message}`);
const limiter = observe(
  createLimiter({
    store: redisStore(client),
    policy: fixedWindow({ limit: 5, window: '1m' }),
    timeout: '200ms',
    ...(process.env.ON_OUTAGE === 'log' ? { onOutage: logOutage } : {}),
  }),
);
const limit = rateLimit({ limiter });
const server = createServer((req, res) => {
  void limit(req, res).then((pass) => pass && res.end('ok'));
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const { port } = server.address() as AddressInfo;
const status = await new Promise<number | undefined>((resolve, reject) =>
  request({ host: '127.0.0.1', port }, (res) => {
    res.resume();
    res.on('end', () => resolve(res.statusCode));
  })
    .on('error', reject)
    .end(),
);
console.log(status);
server.close();
client.disconnect();
