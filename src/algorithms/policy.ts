import { formatDuration } from '../core/duration.js';
import type { PeerNames } from '../core/validate.js';

const WINDOW = 'ms, or a string such as "1m"';

/** The peers' names (express-rate-limit, rate-limiter-flexible, @fastify/rate-limit) for a window policy's options. */
export const WINDOW_PEER_NAMES: PeerNames = {
  max: 'use "limit"',
  points: 'use "limit"',
  windowMs: `use "window" (${WINDOW})`,
  timeWindow: `use "window" (${WINDOW})`,
  duration: `use "window" (${WINDOW}; rate-limiter-flexible's duration is in seconds, sluice's numbers in ms)`,
};

/**
 * A rate as an unnamed policy's default name, `<count>-per-<duration>` ('5-per-1s', '100-per-15m'):
 * it tells a client reading the headers what the policy allows, and tells apart the policies of a
 * limiter that differ in it. Always a valid name (see policyName).
 */
export function rateName(count: number, ms: number): string {
  return `${count}-per-${formatDuration(ms)}`;
}
