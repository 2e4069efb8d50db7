import {
  createJointLimiter,
  createLimiter,
  fixedWindow,
  observe,
  type DeniedCacheOptions,
  type Duration,
  type JointLimiter,
  type JointPart,
  type Limiter,
  type Policy,
  type Store,
} from '../index.js';
import { nodesOf, type Domain, type RuleNode, type ServeConfig } from './config.js';
import type { ServiceRecorder } from './dashboard.js';
import { UNIT_MS, type ReportedLimit, type RuleLease, type UnitName } from './limits.js';
import { limiterKey, matchDescriptor, type Entry, type Match } from './match.js';
import { BadRequestError, type RateLimitRequest, type RequestDescriptor } from './messages.js';
import type { JsonObject } from './metadata.js';
import type { Metrics } from './metrics.js';

/** What the service passes to every limiter it builds. */
export interface LimiterSettings {
  readonly store: Store;
  readonly prefix: string;
  readonly timeout?: Duration;
  readonly onStoreError?: 'allow' | 'deny';
  readonly deniedCache?: DeniedCacheOptions;
  readonly penalty?: { after: number; block: Duration };
}

// Overrides come from the request; their policies are kept for reuse, up to this many kinds.
const MOST_OVERRIDES = 1024;

/** A rule's limiter, and what its answers need, built once per configuration. */
export interface Rule {
  readonly limiter: Limiter;
  /** current_limit for each of the limiter's policies, in its order. */
  readonly reported: readonly ReportedLimit[];
  /** shadow_mode: decided, never denying, so not part of a request's joint step. */
  readonly shadow: boolean;
  /** `lease`: decided through this process's quota leases, before the request's other descriptors. */
  readonly leased: boolean;
}

/** One descriptor's part in a request, once matched. */
export type Plan =
  | { readonly kind: 'free'; readonly limitRemaining: number; readonly metadata?: JsonObject }
  | {
      readonly kind: 'limit';
      readonly rule: Rule;
      readonly key: string;
      readonly cost: number;
      /** An override's policy, passed with the call; absent for a rule's own. */
      readonly policy?: Policy;
      readonly metricRule: string;
      readonly metadata?: JsonObject;
    }
  | {
      /** Over its limit whatever the count: `requests_per_unit: 0`, or a cost above what the limit could ever admit. */
      readonly kind: 'refuse';
      readonly reported: ReportedLimit;
      readonly resetAfterMs: number;
      readonly shadow: boolean;
      readonly metricRule: string;
      readonly metadata?: JsonObject;
    };

/** A matched descriptor of a request, before `replaces` is applied. */
interface Matched {
  readonly descriptor: RequestDescriptor;
  readonly cost: number;
  readonly match: Match | undefined;
}

/** envoyproxy/ratelimit's limit_remaining for an `unlimited` rule. */
const UNLIMITED_REMAINING = 0xffff_ffff;
const FREE: Plan = { kind: 'free', limitRemaining: 0 };

/** A descriptor of `request` matched in `domain`, with its cost; throws BadRequestError for a malformed one. */
function matchedOf(
  domain: Domain | undefined,
  request: RateLimitRequest,
  descriptor: RequestDescriptor,
  i: number,
): Matched {
  const cost = descriptor.hitsAddend || request.hitsAddend || 1;
  if (!Number.isSafeInteger(cost) || cost < 1)
    throw new BadRequestError(`descriptors[${i}].hits_addend`, `must be a whole number; got ${cost}`);
  if (descriptor.entries.length === 0)
    throw new BadRequestError(`descriptors[${i}].entries`, 'must hold at least one entry');
  return {
    descriptor,
    cost,
    match: domain && descriptor.limit === undefined ? matchDescriptor(domain, descriptor.entries) : undefined,
  };
}

/** The rule names that matched rules replace (an unlimited rule's too); rare, so only made when there are some. */
function replacedBy(matched: readonly Matched[]): Set<string> | undefined {
  let replaced: Set<string> | undefined;
  for (const { match } of matched) {
    if (match && match.node.replaces.length > 0) {
      replaced ??= new Set();
      for (const name of match.node.replaces) replaced.add(name);
    }
  }
  return replaced;
}

/** The first of `policies` that could never admit `cost`, or -1. */
function tooSmallFor(policies: readonly Policy[], cost: number): number {
  for (let i = 0; i < policies.length; i++) if (cost > (policies[i] as Policy).maxCost) return i;
  return -1;
}

/** What a deny-all limit reports as its reset, as envoyproxy/ratelimit does: the end of its current window. */
function untilWindowEnds(windowMs: number): number {
  return windowMs - (Date.now() % windowMs);
}

/** A configuration's limiters, ready to decide: one per rule, one per domain for overrides. */
export class Rules {
  private readonly rules = new Map<RuleNode, Rule>();
  private readonly overrideLimiters = new Map<string, Limiter>();
  private readonly overridePolicies = new Map<string, Policy>();
  /** Decides a request's descriptors in one step (see verdicts in service.ts). */
  readonly joint: JointLimiter;

  constructor(
    readonly config: ServeConfig,
    private readonly settings: LimiterSettings,
    private readonly metrics: Metrics,
    /** The dashboard's recorder (`--dashboard`): told each decision's latency, and the store's outages. */
    private readonly dashboard?: ServiceRecorder,
  ) {
    const { store, prefix, timeout, onStoreError } = settings;
    this.joint = createJointLimiter({
      store,
      prefix,
      ...(timeout === undefined ? {} : { timeout }),
      ...(onStoreError === undefined ? {} : { onStoreError }),
      onOutage: () => undefined,
    });
    metrics.countStoreErrors(this.joint, { 'sluice.rule': 'joint' });
    if (dashboard) this.joint.watchStore(dashboard.watcher);
    for (const domain of config.domains.values()) {
      for (const node of nodesOf(domain.root)) {
        if (node.limits.length > 0) {
          const policies = node.limits.map((l) => l.policy);
          this.rules.set(node, {
            limiter: this.limiter(domain.name, node.path, policies, node.shadowMode, node.lease),
            reported: node.limits.map((l) => l.reported),
            shadow: node.shadowMode,
            leased: node.lease !== undefined,
          });
        }
      }
      // A placeholder policy: an override's call always passes its own.
      this.overrideLimiters.set(
        domain.name,
        this.limiter(domain.name, 'override', [fixedWindow({ limit: 1, window: 1000, name: 'override' })], false),
      );
    }
  }

  private limiter(
    domain: string,
    rule: string,
    policy: readonly Policy[],
    shadow: boolean,
    lease?: RuleLease,
  ): Limiter {
    const { store, prefix, timeout, onStoreError, deniedCache, penalty } = this.settings;
    const limiter = createLimiter({
      store,
      policy,
      prefix,
      shadow,
      ...(lease === undefined ? {} : { lease }),
      ...(timeout === undefined ? {} : { timeout }),
      ...(onStoreError === undefined ? {} : { onStoreError }),
      ...(deniedCache === undefined ? {} : { deniedCache }),
      ...(penalty === undefined ? {} : { penalty }),
      // The service reports store failures through its metrics and health check.
      onOutage: () => undefined,
    });
    const meter = this.metrics.meter({ 'sluice.domain': domain, 'sluice.rule': rule });
    const { dashboard } = this;
    if (dashboard === undefined) return observe(limiter, { meter });
    limiter.watchStore(dashboard.watcher);
    return observe(limiter, {
      meter,
      onDecision: (e) => (e.operation === 'limit' ? dashboard.timed(e.decision, e.durationMs) : undefined),
    });
  }

  /** Gives back every lease this configuration's rules hold; their limiters ask the store from then on. */
  async close(): Promise<void> {
    await Promise.all([...this.rules.values()].filter((rule) => rule.leased).map((rule) => rule.limiter.close()));
  }

  /** The rule a descriptor of `domain` reaches, its path and the key it counts under: the dashboard's lookup. */
  find(domain: string, entries: readonly Entry[]): { rule: Rule; path: string; key: string } | undefined {
    const found = this.config.domains.get(domain);
    const match = found && entries.length > 0 ? matchDescriptor(found, entries) : undefined;
    const rule = match && this.rules.get(match.node);
    return match && rule ? { rule, path: match.node.path, key: match.key } : undefined;
  }

  private overridePolicy(requestsPerUnit: number, unit: UnitName): Policy {
    const id = `${requestsPerUnit}/${unit}`;
    let policy = this.overridePolicies.get(id);
    if (policy === undefined) {
      policy = fixedWindow({ limit: requestsPerUnit, window: UNIT_MS[unit as keyof typeof UNIT_MS] });
      if (this.overridePolicies.size >= MOST_OVERRIDES) this.overridePolicies.clear();
      this.overridePolicies.set(id, policy);
    }
    return policy;
  }

  /**
   * Whether these descriptors' limits can be one joint step: not with a penalty box (its strikes
   * and blocks are each descriptor's own), nor where the store cannot take their keys in one step.
   */
  canDecideTogether(parts: readonly JointPart[]): boolean {
    return this.settings.penalty === undefined && this.joint.canDecide(parts);
  }

  /** Each descriptor's rule and cost; `replaces` applied. Throws BadRequestError for a malformed request. */
  plan(request: RateLimitRequest): Plan[] {
    if (request.domain === '') throw new BadRequestError('domain', 'must not be empty');
    const { descriptors } = request;
    if (descriptors.length === 0) throw new BadRequestError('descriptors', 'must hold at least one descriptor');
    const domain = this.config.domains.get(request.domain);
    // Loops into arrays of their size, not map() closures or push()'s spare room: this runs for every request.
    const matched = new Array<Matched>(descriptors.length);
    for (let i = 0; i < descriptors.length; i++)
      matched[i] = matchedOf(domain, request, descriptors[i] as RequestDescriptor, i);
    const replaced = replacedBy(matched);
    const plans = new Array<Plan>(matched.length);
    for (let i = 0; i < matched.length; i++) plans[i] = this.planOne(domain, matched[i] as Matched, i, replaced);
    return plans;
  }

  private planOne(
    domain: Domain | undefined,
    { descriptor, cost, match }: Matched,
    index: number,
    replaced: ReadonlySet<string> | undefined,
  ): Plan {
    if (domain === undefined) return FREE;
    if (descriptor.limit !== undefined) return this.overridePlan(domain, descriptor, cost, index);
    if (match === undefined) return FREE;
    const { node, metricRule } = match;
    const { metadata, shadowMode: shadow } = node;
    if (node.unlimited) return { kind: 'free', limitRemaining: UNLIMITED_REMAINING, ...(metadata && { metadata }) };
    if (replaced !== undefined && node.names.some((name) => replaced.has(name))) return FREE;
    if (node.denyAll) {
      const { reported, windowMs } = node.denyAll;
      return { kind: 'refuse', reported, resetAfterMs: untilWindowEnds(windowMs), shadow, metricRule, metadata };
    }
    const rule = this.rules.get(node);
    if (rule === undefined) return FREE;
    // A cost no policy could ever admit: over the limit outright, as envoyproxy/ratelimit answers it.
    const tooSmall = tooSmallFor(rule.limiter.policies, cost);
    if (tooSmall >= 0)
      return {
        kind: 'refuse',
        reported: rule.reported[tooSmall] as ReportedLimit,
        resetAfterMs: 0,
        shadow,
        metricRule,
        metadata,
      };
    const { key } = match;
    return metadata === undefined
      ? { kind: 'limit', rule, key, cost, metricRule }
      : { kind: 'limit', rule, key, cost, metricRule, metadata };
  }

  /** Envoy's per-descriptor limit: a fixed window of its own; 0 per unit denies every request. */
  private overridePlan(domain: Domain, descriptor: RequestDescriptor, cost: number, index: number): Plan {
    const { requestsPerUnit, unit } = descriptor.limit as NonNullable<RequestDescriptor['limit']>;
    const field = `descriptors[${index}].limit`;
    if (!Number.isInteger(requestsPerUnit) || requestsPerUnit < 0 || requestsPerUnit > 0xffff_ffff)
      throw new BadRequestError(`${field}.requests_per_unit`, `must be a whole number; got ${requestsPerUnit}`);
    if (!Object.hasOwn(UNIT_MS, unit))
      throw new BadRequestError(`${field}.unit`, `must be one of ${Object.keys(UNIT_MS).join(', ')}; got ${unit}`);
    const reported = { requestsPerUnit, unit };
    const metricRule = 'override';
    if (requestsPerUnit === 0 || cost > requestsPerUnit) {
      const resetAfterMs = requestsPerUnit === 0 ? untilWindowEnds(UNIT_MS[unit as keyof typeof UNIT_MS]) : 0;
      return { kind: 'refuse', reported, resetAfterMs, shadow: false, metricRule };
    }
    return {
      kind: 'limit',
      rule: {
        limiter: this.overrideLimiters.get(domain.name) as Limiter,
        reported: [reported],
        shadow: false,
        leased: false,
      },
      key: limiterKey(domain.name, descriptor.entries),
      cost,
      policy: this.overridePolicy(requestsPerUnit, unit),
      metricRule,
    };
  }
}
