// The two-line setup of each framework, as the docs show it, must type-check against the built types.
import { createServer } from 'node:http';
import { getConnInfo } from '@hono/node-server/conninfo';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import { Controller, Get, Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { createLimiter, fixedWindow, memoryStore } from 'sluice';
import { rateLimit as expressRateLimit } from 'sluice/express';
import { rateLimit as fastifyRateLimit } from 'sluice/fastify';
import { rateLimit as honoRateLimit } from 'sluice/hono';
import { rateLimit as koaRateLimit } from 'sluice/koa';
import { RateLimit, RateLimitGuard, RateLimitModule, SkipRateLimit } from 'sluice/nestjs';
import { rateLimit as nodeRateLimit } from 'sluice/node';

const limiter = createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 5, window: '1m' }) });

express().use(expressRateLimit({ limiter }));
express().use(expressRateLimit({ limiter, key: (req) => req.path }));

const fastify = Fastify();
await fastify.register(fastifyRateLimit, { limiter, skip: (request) => request.url === '/health' });
fastify.get('/login', { config: { rateLimit: { limiter, status: 503 } } }, () => 'login');
fastify.get('/health', { config: { rateLimit: false } }, () => 'ok');

new Hono().use(honoRateLimit({ limiter, getConnInfo, skip: (c) => c.req.path === '/health' }));

new Koa().use(koaRateLimit({ limiter, key: (ctx) => ctx.path }));

// Nest's decorators, called as functions (this project does not turn on experimentalDecorators).
class HealthController {
  health() {
    return 'ok';
  }
}
Controller()(HealthController);
RateLimit({ limiter, status: 503 })(HealthController);
const health = Object.getOwnPropertyDescriptor(HealthController.prototype, 'health') as PropertyDescriptor;
Get('health')(HealthController.prototype, 'health', health);
SkipRateLimit()(HealthController.prototype, 'health', health);
class AppModule {}
Module({
  imports: [RateLimitModule.forRoot({ limiter, key: (req) => req.ip ?? 'unknown' })],
  controllers: [HealthController],
  providers: [{ provide: APP_GUARD, useClass: RateLimitGuard }],
})(AppModule);

const limit = nodeRateLimit({ limiter });
createServer((req, res) => {
  void limit(req, res).then((allowed) => {
    if (allowed) res.end('hello');
  });
});
