import { formatDuration } from '../core/duration.js';
import type { Policy } from '../core/types.js';
import { policyName, policyUnit } from '../core/validate.js';
import { definePolicy, type Algorithm } from '../engine/algorithm.js';

/**
 * A rate as an unnamed policy's default name, `<count>-per-<duration>` ('5-per-1s', '100-per-15m'):
 * it tells a client reading the headers what the policy allows, and tells apart the policies of a
 * limiter that differ in it. Always a valid name (see policyName).
 */
export function rateName(count: number, ms: number): string {
  return `${count}-per-${formatDuration(ms)}`;
}

/** A window algorithm's policy (fixed window, sliding window, sliding log): `limit` per `windowMs`. */
export function windowPolicy(
  algorithm: Policy['algorithm'],
  kind: Algorithm,
  options: { readonly name?: unknown; readonly counts?: unknown },
  limit: number,
  windowMs: number,
): Policy {
  return definePolicy(
    {
      algorithm,
      name: policyName(options.name, rateName(limit, windowMs)),
      counts: policyUnit(options.counts),
      limit,
      windowMs,
      maxCost: limit,
    },
    kind,
    [limit, windowMs],
  );
}
