import { sha256Bytes } from '../core/digest.js';
import { bindingPolicy } from '../core/binding.js';
import { InvalidOptionError } from '../core/errors.js';
import { REQUESTS } from '../core/validate.js';
import type { Decision, PolicyDecision } from '../core/types.js';

/**
 * Which rate-limit header fields to send (units in docs/headers.md):
 * - 'draft-11': `RateLimit-Policy` and `RateLimit`, one item per policy (draft-ietf-httpapi-ratelimit-headers-11).
 * - 'draft-8': the same fields as express-rate-limit 8 sends them: `t` the time to a full reset, and a partition key `pk`.
 * - 'draft-7': one `RateLimit` dictionary `limit=, remaining=, reset=` and `RateLimit-Policy: <q>;w=<s>`.
 * - 'draft-6': `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` and `RateLimit-Policy`.
 * - 'legacy': `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (epoch seconds, as GitHub).
 * - 'openai': `x-ratelimit-limit-<unit>`, `x-ratelimit-remaining-<unit>`, `x-ratelimit-reset-<unit>`
 *   per unit the policies count (`requests`, `tokens`), as OpenAI's API sends them, and
 *   `retry-after-ms` on a denial: what LLM client libraries read to back off.
 * - false: none. `Retry-After` is sent on every denial whatever the mode.
 */
export type HeaderMode = 'draft-11' | 'draft-8' | 'draft-7' | 'draft-6' | 'legacy' | 'openai' | false;

export const HEADER_MODES: readonly HeaderMode[] = [
  'draft-11',
  'draft-8',
  'draft-7',
  'draft-6',
  'legacy',
  'openai',
  false,
];

export type HeaderFields = Readonly<Record<string, string>>;

/** Whole seconds, rounded up: a client that waits this long is past the moment in question. */
export const seconds = (ms: number): number => Math.ceil(ms / 1000);

// Algorithms whose quota comes back one unit at a time, evenly spaced, not all at once.
const STEADY_REFILL = new Set(['token-bucket', 'gcra']);

/**
 * draft-11's `t` (since draft -10): ms until this policy makes more quota available. A policy that
 * denied: its wait, so that Retry-After (the longest such wait) is never earlier than any `t` of a
 * denying policy. A token bucket or GCRA: the next unit, one every windowMs / limit. Any other:
 * the full reset, exact for a fixed window, an upper bound for the rest (docs/headers.md).
 */
export function moreQuotaAfterMs(p: PolicyDecision): number {
  if (!p.allowed) return p.retryAfterMs;
  if (!STEADY_REFILL.has(p.algorithm) || p.resetAfterMs === 0) return p.resetAfterMs;
  const unitMs = p.windowMs / p.limit;
  const pastUnit = p.resetAfterMs % unitMs;
  // resetAfterMs is rounded up to the ms: a remainder below 1 ms is that rounding, so a whole unit is still to come.
  return pastUnit < 1 ? unitMs : pastUnit;
}

/** A policy item's quota: `q` and `w`, and `qu` for a unit other than requests (the drafts' default). */
function quota(p: PolicyDecision): string {
  return `q=${p.limit}${p.counts === REQUESTS ? '' : `;qu="${p.counts}"`};w=${seconds(p.windowMs)}`;
}

/**
 * A list field's value (RFC 9651): the item of each policy, joined by `, `. Built in a loop, not
 * with map and join: this runs for every request, where those made an array for each field.
 */
function itemList(entries: readonly PolicyDecision[], item: (p: PolicyDecision) => string): string {
  let list = '';
  for (let i = 0; i < entries.length; i++) list += (i === 0 ? '' : ', ') + item(entries[i] as PolicyDecision);
  return list;
}

// RateLimit-Policy items built, by policy name, with what they were built from. Bounded: policies
// chosen per request (tiers) may bear many names, and an item not kept is only built each time.
const POLICY_ITEMS_KEPT = 256;
const policyItems = new Map<
  string,
  Pick<PolicyDecision, 'counts' | 'limit' | 'windowMs'> & { readonly item: string }
>();

/**
 * draft-11's RateLimit-Policy item of a policy, `"name";q=100;w=60`, built once for each policy:
 * one string for every request, which setHeader flattens once, instead of a new one each time.
 */
function draft11Policy(p: PolicyDecision): string {
  const kept = policyItems.get(p.name);
  if (kept !== undefined && kept.limit === p.limit && kept.windowMs === p.windowMs && kept.counts === p.counts)
    return kept.item;
  const item = `"${p.name}";${quota(p)}`;
  if (kept !== undefined || policyItems.size < POLICY_ITEMS_KEPT)
    policyItems.set(p.name, { counts: p.counts, limit: p.limit, windowMs: p.windowMs, item });
  return item;
}

const draft11Item = (p: PolicyDecision): string => `"${p.name}";r=${p.remaining};t=${seconds(moreQuotaAfterMs(p))}`;

/** draft-11: every policy is an item named by the policy; `w` and `t` in seconds. */
export function draft11Headers(entries: readonly PolicyDecision[]): HeaderFields {
  return { 'RateLimit-Policy': itemList(entries, draft11Policy), RateLimit: itemList(entries, draft11Item) };
}

/**
 * draft-8's partition key: which of the server's partitions (here, which client key) the quota
 * applies to, as an opaque Byte Sequence: the first 12 bytes of the key's SHA-256, so the key
 * itself (an address, a user id) is not sent.
 */
function partitionKey(key: string): string {
  return `:${btoa(String.fromCharCode(...sha256Bytes(key).subarray(0, 12)))}:`;
}

/**
 * draft-8 (draft-ietf-httpapi-ratelimit-headers-08, express-rate-limit 8's 'draft-8'): draft-11's
 * items, but `t` is the time to a full reset, as that draft defines it, and the policy carries the
 * client's partition key `pk` when the key is known.
 */
export function draft8Headers(entries: readonly PolicyDecision[], key?: string): HeaderFields {
  const pk = key === undefined ? '' : `;pk=${partitionKey(key)}`;
  return {
    'RateLimit-Policy': itemList(entries, (p) => `${draft11Policy(p)}${pk}`),
    RateLimit: itemList(entries, (p) => `"${p.name}";r=${p.remaining};t=${seconds(p.resetAfterMs)}`),
  };
}

/** draft-7: `RateLimit: limit=100, remaining=50, reset=5` and `RateLimit-Policy: 100;w=60`. */
export function draft7Headers(entries: readonly PolicyDecision[]): HeaderFields {
  const p = bindingPolicy(entries);
  return {
    'RateLimit-Policy': `${p.limit};w=${seconds(p.windowMs)}`,
    RateLimit: `limit=${p.limit}, remaining=${p.remaining}, reset=${seconds(p.resetAfterMs)}`,
  };
}

/** draft-6: three fields plus `RateLimit-Policy: 100;w=60`; the reset is delta seconds. */
export function draft6Headers(entries: readonly PolicyDecision[]): HeaderFields {
  const p = bindingPolicy(entries);
  return {
    'RateLimit-Policy': `${p.limit};w=${seconds(p.windowMs)}`,
    'RateLimit-Limit': String(p.limit),
    'RateLimit-Remaining': String(p.remaining),
    'RateLimit-Reset': String(seconds(p.resetAfterMs)),
  };
}

/**
 * The `X-RateLimit-*` fields most clients know from GitHub. `X-RateLimit-Reset` is the Unix time
 * in seconds (rounded up) at which the quota resets, as GitHub sends it; it is computed from this
 * server's clock (`nowMs`), the same clock that writes the `Date` header clients compare it with.
 */
export function legacyHeaders(entries: readonly PolicyDecision[], nowMs: number): HeaderFields {
  const p = bindingPolicy(entries);
  return {
    'X-RateLimit-Limit': String(p.limit),
    'X-RateLimit-Remaining': String(p.remaining),
    'X-RateLimit-Reset': String(seconds(nowMs + p.resetAfterMs)),
  };
}

/**
 * A duration as OpenAI's headers write one (Go's form): `0s`, `120ms` below a second, else hours,
 * minutes and seconds, the seconds with their fraction: `1s`, `1.5s`, `6m0s`, `1h0m0s`.
 */
export function goDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms < 1000) return `${ms}ms`;
  const hours = Math.floor(ms / 3_600_000);
  const minutes = Math.floor((ms % 3_600_000) / 60_000);
  const secondsPart = `${(ms % 60_000) / 1000}s`;
  if (hours > 0) return `${hours}h${minutes}m${secondsPart}`;
  return minutes > 0 ? `${minutes}m${secondsPart}` : secondsPart;
}

/** An HTTP field name's characters (RFC 9110's token): Node refuses a header named with any other. */
const FIELD_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** Refuses the 'openai' mode for policies counting a unit that cannot end an `x-ratelimit-*-<unit>` field's name. */
export function checkOpenAiUnits(policies: readonly Pick<PolicyDecision, 'name' | 'counts'>[]): void {
  const unnamable = policies.find((policy) => !FIELD_NAME.test(policy.counts));
  if (unnamable !== undefined) {
    throw new InvalidOptionError(
      'headers',
      'openai',
      `another mode, or policies counting units an HTTP field name can hold ('openai' names fields x-ratelimit-limit-<unit>; policy "${unnamable.name}" counts ${JSON.stringify(unnamable.counts)}: letters, digits and !#$%&'*+-.^_\`|~ only)`,
    );
  }
}

/** OpenAI's fields: per unit, the numbers of that unit's binding policy. */
export function openAiHeaders(entries: readonly PolicyDecision[]): HeaderFields {
  const headers: Record<string, string> = {};
  for (const unit of new Set(entries.map((p) => p.counts))) {
    const p = bindingPolicy(entries.filter((entry) => entry.counts === unit));
    headers[`x-ratelimit-limit-${unit}`] = String(p.limit);
    headers[`x-ratelimit-remaining-${unit}`] = String(p.remaining);
    headers[`x-ratelimit-reset-${unit}`] = goDuration(p.resetAfterMs);
  }
  return headers;
}

/**
 * The rate-limit fields of one mode, without Retry-After, in a new object; `key` is the client's,
 * for draft-8's `pk`. `nowMs` (default: read now) is read by the legacy mode alone: the clock is not
 * read for the others, on every request.
 */
export function modeHeaders(
  mode: HeaderMode,
  entries: readonly PolicyDecision[],
  nowMs?: number,
  key?: string,
): Record<string, string> {
  switch (mode) {
    case 'draft-11':
      return draft11Headers(entries);
    case 'draft-8':
      return draft8Headers(entries, key);
    case 'draft-7':
      return draft7Headers(entries);
    case 'draft-6':
      return draft6Headers(entries);
    case 'legacy':
      return legacyHeaders(entries, nowMs ?? Date.now());
    case 'openai':
      return openAiHeaders(entries);
    case false:
      return {};
  }
}

export function validHeaderMode(value: unknown): HeaderMode {
  if (value === undefined) return 'draft-11';
  if (!HEADER_MODES.includes(value as HeaderMode)) {
    throw new InvalidOptionError(
      'headers',
      value,
      `one of ${HEADER_MODES.map((mode) => JSON.stringify(mode)).join(', ')}`,
    );
  }
  return value as HeaderMode;
}

/** The policies whose quota this request exceeded (none in shadow mode, where nothing is denied). */
export function violated(decision: Decision): readonly PolicyDecision[] {
  return decision.allowed ? [] : decision.policies.filter((p) => !p.allowed);
}

/**
 * Every header for a decision: the mode's fields, one item per policy where the mode allows, and
 * `Retry-After` (RFC 9110) on a denial, in whole seconds rounded up, so a client that waits that
 * long is admitted. `nowMs` is this server's clock for the legacy reset (default: read then); `key`,
 * the client's, gives draft-8 its partition key.
 */
export function rateLimitHeaders(
  decision: Decision,
  mode: HeaderMode = 'draft-11',
  nowMs?: number,
  key?: string,
): HeaderFields {
  const headers = modeHeaders(mode, decision.policies, nowMs, key);
  if (!decision.allowed) {
    headers['Retry-After'] = String(seconds(decision.retryAfterMs));
    if (mode === 'openai') headers['retry-after-ms'] = String(decision.retryAfterMs);
  }
  return headers;
}

export interface RateLimitResponse {
  /** 429 when the request was denied, else 200 (let the handler pick its own success status). */
  readonly status: 200 | 429;
  readonly statusText: 'OK' | 'Too Many Requests';
  /** Header names in their canonical case; values ready to send. */
  readonly headers: HeaderFields;
}

/** Status and draft-11 headers for a decision, framework-neutral. */
export function rateLimitResponse(decision: Decision): RateLimitResponse {
  const headers = rateLimitHeaders(decision);
  return decision.allowed
    ? { status: 200, statusText: 'OK', headers }
    : { status: 429, statusText: 'Too Many Requests', headers };
}
