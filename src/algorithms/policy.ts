import { formatDuration } from '../core/duration.js';

/**
 * A rate as an unnamed policy's default name, `<count>-per-<duration>` ('5-per-1s', '100-per-15m'):
 * it tells a client reading the headers what the policy allows, and tells apart the policies of a
 * limiter that differ in it. Always a valid name (see policyName).
 */
export function rateName(count: number, ms: number): string {
  return `${count}-per-${formatDuration(ms)}`;
}
