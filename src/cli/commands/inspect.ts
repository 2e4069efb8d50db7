import { createLimiter } from '../../index.js';
import { REDIS_HELP, UsageError, onePositional, prefixOf, redisOption, type Command } from '../command.js';
import { POLICY_SYNTAX, describePolicy, parsePolicySpec } from '../policy-spec.js';
import { withRedis } from '../with-redis.js';

export const inspect: Command = {
  name: 'inspect',
  summary: 'show the decision a key would get now, without consuming anything',
  help: `Usage: sluice inspect <key> --policy <policy> [options]

Shows what the next request of cost 1 for <key> would get under <policy>: allowed or not,
remaining, and when the key resets. Nothing is consumed and nothing is written.

Options:
  --policy <policy>  ${POLICY_SYNTAX}
  --prefix <prefix>  the limiter's key prefix (default: sluice)
  ${REDIS_HELP}
  --json             print one JSON object instead of text
  -h, --help         show this help

Examples:
  sluice inspect user:42 --policy fixed-window:100/1m
  sluice inspect user:42 --policy token-bucket:10@2/s --prefix api --json
  REDIS_URL=redis://10.0.0.5:6379 sluice inspect 203.0.113.7 --policy sliding-log:5/1s`,
  options: { policy: { type: 'string' }, prefix: { type: 'string' }, json: { type: 'boolean' }, ...redisOption },
  async run(parsed, io) {
    const key = onePositional('inspect', 'key', parsed);
    const spec = parsed.values.policy;
    if (typeof spec !== 'string')
      throw new UsageError('sluice inspect: missing --policy, e.g. --policy fixed-window:5/1s');
    const policy = parsePolicySpec(spec);
    const prefix = prefixOf(parsed);
    return withRedis('inspect', parsed, io, async ({ store, safeUrl }) => {
      const limiter = createLimiter({ store, policy, prefix });
      const decision = await limiter.peek(key);
      const report = {
        redis: safeUrl,
        key,
        prefix: limiter.prefix,
        redisKey: limiter.storageKeys(key).policies[0],
        policy: { spec, algorithm: policy.algorithm, limit: policy.limit, windowMs: policy.windowMs },
        decision,
      };
      if (parsed.values.json) {
        io.out(JSON.stringify(report));
        return;
      }
      io.out(`key        ${key} (redis key ${report.redisKey} on ${safeUrl})`);
      io.out(`policy     ${policy.algorithm}, ${describePolicy(policy)}`);
      io.out(`next call  ${decision.allowed ? 'allowed' : 'denied'}`);
      io.out(`remaining  ${decision.remaining} of ${decision.limit}`);
      io.out(`resets in  ${decision.resetAfterMs} ms`);
      if (!decision.allowed) io.out(`retry in   ${decision.retryAfterMs} ms`);
    });
  },
};
