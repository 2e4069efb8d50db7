import { EXIT, RedisRequiredError, redisUrlOf, type CliIo, type ParsedCommand } from './command.js';
import { connectRedis, type RedisConnection } from './connect.js';

/** Connects to the Redis of --redis or REDIS_URL, runs `work`, and always disconnects. */
export async function withRedis(
  command: string,
  parsed: ParsedCommand,
  io: CliIo,
  work: (redis: RedisConnection) => Promise<void>,
): Promise<number> {
  const given = redisUrlOf(parsed, io);
  if (given === undefined) throw new RedisRequiredError(command);
  const redis = await connectRedis(given.url, given.source);
  try {
    await work(redis);
  } finally {
    await redis.close();
  }
  return EXIT.ok;
}
