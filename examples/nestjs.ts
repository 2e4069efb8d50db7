import { Controller, Get, Module } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import { createLimiter, redisStore, slidingLog } from 'sluice';
import { RateLimitGuard, RateLimitModule, SkipRateLimit } from 'sluice/nestjs';

// No offline queue: while Redis is down a command fails at once, so a request waits milliseconds, not
// the limiter's 1 s timeout (bench/fail-fast.ts). Commands then fail before the first connection too: connect first.
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  lazyConnect: true,
});
await redis.connect();
const limiter = createLimiter({
  store: redisStore(redis),
  policy: slidingLog({ limit: 5, window: '1m', name: 'per-minute' }),
});

@Controller()
class AppController {
  @Get()
  hello() {
    return 'hello';
  }

  @Get('health')
  @SkipRateLimit()
  health() {
    return 'ok';
  }
}

@Module({
  imports: [RateLimitModule.forRoot({ limiter })],
  controllers: [AppController],
  providers: [{ provide: APP_GUARD, useClass: RateLimitGuard }],
})
class AppModule {}

const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
await app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1');
console.log(`listening on ${await app.getUrl()}`);
