import { createLimiter } from '../../index.js';
import { REDIS_HELP, onePositional, prefixOf, redisOption, type Command } from '../command.js';
import { EXAMPLE_POLICIES, POLICY_SYNTAX, parsePolicySpec } from '../policy-spec.js';
import { withRedis } from '../with-redis.js';

export const reset: Command = {
  name: 'reset',
  summary: "forget a key's state, so its next request starts afresh",
  help: `Usage: sluice reset <key> [options]

Deletes the state sluice keeps for <key>: under one algorithm with --policy, else under every
algorithm (fixed-window, sliding-log, sliding-window, gcra, token-bucket). Deleting a key that holds nothing is not an error.

Options:
  --policy <policy>  only this algorithm's state: ${POLICY_SYNTAX},
                     or just the algorithm's name (fixed-window, sliding-log, sliding-window, gcra, token-bucket)
  --prefix <prefix>  the limiter's key prefix (default: sluice)
  ${REDIS_HELP}
  --json             print one JSON object instead of text
  -h, --help         show this help

Examples:
  sluice reset user:42
  sluice reset user:42 --policy token-bucket --prefix api
  sluice reset 203.0.113.7 --policy fixed-window:100/1m --redis redis://10.0.0.5:6379 --json`,
  options: { policy: { type: 'string' }, prefix: { type: 'string' }, json: { type: 'boolean' }, ...redisOption },
  async run(parsed, io) {
    const key = onePositional('reset', 'key', parsed);
    const spec = parsed.values.policy;
    // A key's name depends on its algorithm only, so an algorithm's name is enough to find it.
    const specs = typeof spec === 'string' ? [EXAMPLE_POLICIES[spec] ?? spec] : Object.values(EXAMPLE_POLICIES);
    const policies = specs.map(parsePolicySpec);
    const prefix = prefixOf(parsed);
    return withRedis('reset', parsed, io, async ({ store, safeUrl }) => {
      const limiters = policies.map((policy) => createLimiter({ store, policy, prefix }));
      await Promise.all(limiters.map((limiter) => limiter.reset(key)));
      const redisKeys = limiters.map((limiter) => limiter.storageKeys(key).policies[0]);
      if (parsed.values.json) {
        io.out(
          JSON.stringify({
            redis: safeUrl,
            key,
            prefix: limiters[0]?.prefix,
            algorithms: policies.map((p) => p.algorithm),
            redisKeys,
          }),
        );
        return;
      }
      io.out(`reset ${key} on ${safeUrl}: deleted ${redisKeys.join(', ')}`);
    });
  },
};
