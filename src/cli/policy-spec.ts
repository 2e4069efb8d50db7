import { fixedWindow, gcra, slidingLog, slidingWindow, tokenBucket, type Policy } from '../index.js';
import { parseDuration } from '../core/duration.js';
import { UsageError, validFlag } from './command.js';

/**
 * The compact policy syntax of the command line (docs/cli.md):
 *   fixed-window:<limit>/<window>        fixed-window:5/1s
 *   sliding-log:<limit>/<window>         sliding-log:100/1m
 *   sliding-window:<limit>/<window>      sliding-window:100/1m
 *   gcra:<limit>/<period>                gcra:20/1s (burst = limit)
 *   token-bucket:<capacity>@<tokens>/<period>   token-bucket:10@2/s (10 tokens, 2 added per second)
 * A window or period is a duration as the library takes it ('250ms', '1s', '1m'), or a bare unit
 * meaning one of it ('s' is '1s').
 */
export const POLICY_SYNTAX =
  'fixed-window:<limit>/<window>, sliding-log:<limit>/<window>, sliding-window:<limit>/<window>, gcra:<limit>/<period> or token-bucket:<capacity>@<tokens>/<period>';

const WINDOWED = /^(fixed-window|sliding-log|sliding-window|gcra):(\d+)\/([\d.]*[a-z]+)$/;
const BUCKET = /^token-bucket:(\d+)@(\d+(?:\.\d+)?)\/([\d.]*[a-z]+)$/;

/** Every algorithm the syntax knows, with an example policy of it (a key's name only depends on the algorithm). */
export const EXAMPLE_POLICIES: Readonly<Record<string, string>> = {
  'fixed-window': 'fixed-window:5/1s',
  'sliding-log': 'sliding-log:5/1s',
  'sliding-window': 'sliding-window:5/1s',
  gcra: 'gcra:5/1s',
  'token-bucket': 'token-bucket:10@2/s',
};

function durationMs(option: string, text: string): number {
  return parseDuration(option, /^[a-z]/.test(text) ? `1${text}` : text);
}

function build(spec: string): Policy | undefined {
  const windowed = WINDOWED.exec(spec);
  if (windowed) {
    const [, algorithm, limit, window] = windowed as unknown as [string, string, string, string];
    const options = { limit: Number(limit), window: durationMs('window', window) };
    const byAlgorithm: Record<string, () => Policy> = {
      'fixed-window': () => fixedWindow(options),
      'sliding-log': () => slidingLog(options),
      'sliding-window': () => slidingWindow(options),
      gcra: () => gcra({ limit: options.limit, period: options.window }),
    };
    return byAlgorithm[algorithm]?.();
  }
  const bucket = BUCKET.exec(spec);
  if (bucket) {
    const [, capacity, tokens, period] = bucket as unknown as [string, string, string, string];
    return tokenBucket({
      capacity: Number(capacity),
      refillPerSecond: (Number(tokens) * 1000) / durationMs('period', period),
    });
  }
  return undefined;
}

/** Parses --policy, or throws a one-line UsageError naming it and the bad value. */
export function parsePolicySpec(spec: string): Policy {
  const policy = validFlag('--policy', spec, () => build(spec));
  if (!policy) throw new UsageError(`sluice: --policy must be ${POLICY_SYNTAX}; got ${JSON.stringify(spec)}`);
  return policy;
}

/** A policy in words: "limit 5 per 1 s", "capacity 10, refilling 2 per second". */
export function describePolicy(policy: Policy): string {
  if (policy.algorithm === 'token-bucket') {
    return `capacity ${policy.limit}, refilling ${(policy.limit * 1000) / policy.windowMs} per second`;
  }
  return `limit ${policy.limit} per ${policy.windowMs / 1000} s`;
}
