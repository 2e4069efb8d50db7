import { EXIT, RedisRequiredError, redisUrlOf, type CliIo, type ParsedCommand } from './command.js';
import { connectRedis, type RedisConnection } from './connect.js';

/** Connects to the Redis of --redis or REDIS_URL, runs `work`, and always disconnects. */
export async function withRedis(command: string, parsed: ParsedCommand, io: CliIo, work: (redis: RedisConnection) => Promise<void>): Promise<number> {
  const url = redisUrlOf(parsed, io);
  if (url === undefined) throw new RedisRequiredError(command);
  const redis = await connectRedis(url, typeof parsed.values.redis === 'string' ? '--redis' : 'REDIS_URL');
  try {
    await work(redis);
  } finally {
    await redis.close();
  }
  return EXIT.ok;
}
