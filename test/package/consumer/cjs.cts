// CommonJS users get the `require` types of every subpath.
import type { rateLimit as expressRateLimit } from 'sluice/express';
import type { rateLimit as fastifyRateLimit } from 'sluice/fastify';
import type { rateLimit as honoRateLimit } from 'sluice/hono';
import type { rateLimit as koaRateLimit } from 'sluice/koa';
import type { RateLimitModule } from 'sluice/nestjs';
import type { rateLimit as nodeRateLimit } from 'sluice/node';

export type Adapters = [
  typeof expressRateLimit,
  typeof fastifyRateLimit,
  typeof honoRateLimit,
  typeof koaRateLimit,
  typeof RateLimitModule,
  typeof nodeRateLimit,
];
