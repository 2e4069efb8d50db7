import { fixedWindow } from '../algorithms/fixed-window.js';
import { bindingPolicy } from '../core/binding.js';
import type { DeniedCacheOptions } from '../limiter/denied-cache.js';
import type { Duration } from '../core/duration.js';
import { createLimiter } from '../limiter/limiter.js';
import type { Decision, Limiter, Policy, PolicyDecision } from '../core/types.js';
import { createJointLimiter, type JointLimiter, type JointPart } from '../limiter/joint.js';
import { rateLimitHeaders } from '../http/headers.js';
import { observe } from '../limiter/observe.js';
import type { Store } from '../engine/store.js';
import {
  UNIT_MS,
  nodesOf,
  type Domain,
  type ReportedLimit,
  type RuleNode,
  type ServeConfig,
  type UnitName,
} from './config.js';
import { matchDescriptor, type Entry, type Match } from './match.js';
import type { Metrics } from './metrics.js';

/** A ShouldRateLimit request, as both transports decode it (proto3 names in camelCase). */
export interface RateLimitRequest {
  readonly domain: string;
  readonly descriptors: readonly RequestDescriptor[];
  /** Units each descriptor takes; 0 means 1. */
  readonly hitsAddend: number;
}

export interface RequestDescriptor {
  readonly entries: readonly Entry[];
  /** Envoy's per-descriptor override: a fixed window of this many per unit, instead of the rule's. */
  readonly limit?: { readonly requestsPerUnit: number; readonly unit: UnitName };
  /** Units this descriptor takes, instead of the request's. */
  readonly hitsAddend?: number;
}

export type Code = 'OK' | 'OVER_LIMIT';

export interface DescriptorStatus {
  readonly code: Code;
  /** Absent for a descriptor no rule limits. */
  readonly currentLimit?: ReportedLimit;
  readonly limitRemaining: number;
  /**
   * When allowed, until the state resets; when over the limit, until the same request would be
   * admitted. Absent for a descriptor no rule limits.
   */
  readonly durationUntilResetMs?: number;
}

export interface RateLimitResponse {
  readonly overallCode: Code;
  readonly statuses: readonly DescriptorStatus[];
  readonly responseHeadersToAdd: readonly Entry[];
}

/** A request that cannot be decided as sent: INVALID_ARGUMENT over gRPC, 400 over HTTP. */
export class BadRequestError extends Error {
  constructor(
    readonly field: string,
    problem: string,
  ) {
    super(`${field}: ${problem}`);
    this.name = 'BadRequestError';
  }
}

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
interface Rule {
  readonly limiter: Limiter;
  /** current_limit for each of the limiter's policies, in its order. */
  readonly reported: readonly ReportedLimit[];
  /** The largest cost all of its policies could ever admit. */
  readonly maxCost: number;
  /** shadow_mode: decided, never denying, so not part of a request's joint step. */
  readonly shadow: boolean;
}

/** One descriptor's part in a request, once matched. */
type Plan =
  | { readonly kind: 'free'; readonly limitRemaining: number }
  | {
      readonly kind: 'limit';
      readonly rule: Rule;
      readonly key: string;
      readonly cost: number;
      /** An override's policy, passed with the call; absent for a rule's own. */
      readonly policy?: Policy;
      readonly metricRule: string;
    };

/** A matched descriptor of a request, before `replaces` is applied. */
interface Matched {
  readonly descriptor: RequestDescriptor;
  readonly cost: number;
  readonly match: Match | undefined;
}

/** envoyproxy/ratelimit's limit_remaining for an `unlimited` rule. */
const UNLIMITED_REMAINING = 0xffff_ffff;

/** A configuration's limiters, ready to decide: one per rule, one per domain for overrides. */
export class Rules {
  private readonly rules = new Map<RuleNode, Rule>();
  private readonly overrideLimiters = new Map<string, Limiter>();
  private readonly overridePolicies = new Map<string, Policy>();
  /** Decides a request's descriptors in one step (see verdicts). */
  readonly joint: JointLimiter;

  constructor(
    readonly config: ServeConfig,
    private readonly settings: LimiterSettings,
    private readonly metrics: Metrics,
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
    for (const domain of config.domains.values()) {
      for (const node of nodesOf(domain.root)) {
        if (node.limits.length > 0) {
          const policies = node.limits.map((l) => l.policy);
          this.rules.set(node, {
            limiter: this.limiter(domain.name, node.path, policies, node.shadowMode),
            reported: node.limits.map((l) => l.reported),
            maxCost: Math.min(...policies.map((p) => p.maxCost)),
            shadow: node.shadowMode,
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

  private limiter(domain: string, rule: string, policy: readonly Policy[], shadow: boolean): Limiter {
    const { store, prefix, timeout, onStoreError, deniedCache, penalty } = this.settings;
    const limiter = createLimiter({
      store,
      policy,
      prefix,
      shadow,
      ...(timeout === undefined ? {} : { timeout }),
      ...(onStoreError === undefined ? {} : { onStoreError }),
      ...(deniedCache === undefined ? {} : { deniedCache }),
      ...(penalty === undefined ? {} : { penalty }),
      // The service reports store failures through its metrics and health check.
      onOutage: () => undefined,
    });
    return observe(limiter, { meter: this.metrics.meter({ 'sluice.domain': domain, 'sluice.rule': rule }) });
  }

  private overridePolicy(requestsPerUnit: number, unit: UnitName, field: string): Policy {
    if (!Number.isInteger(requestsPerUnit) || requestsPerUnit < 1)
      throw new BadRequestError(
        `${field}.requests_per_unit`,
        `must be a whole number of at least 1; got ${requestsPerUnit}`,
      );
    if (!Object.hasOwn(UNIT_MS, unit))
      throw new BadRequestError(`${field}.unit`, `must be SECOND, MINUTE, HOUR or DAY; got ${unit}`);
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
    if (request.descriptors.length === 0) throw new BadRequestError('descriptors', 'must hold at least one descriptor');
    const domain = this.config.domains.get(request.domain);
    const matched = request.descriptors.map((descriptor, i): Matched => {
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
    });
    // The rule names that other matched rules replace; rare, so only made when there are some.
    let replaced: Set<string> | undefined;
    for (const { match } of matched) {
      if (match && !match.node.unlimited && match.node.replaces.length > 0) {
        replaced ??= new Set();
        for (const name of match.node.replaces) replaced.add(name);
      }
    }
    return matched.map((m, i) => this.planOne(domain, m, i, replaced));
  }

  private planOne(
    domain: Domain | undefined,
    { descriptor, cost, match }: Matched,
    index: number,
    replaced: ReadonlySet<string> | undefined,
  ): Plan {
    if (domain === undefined) return { kind: 'free', limitRemaining: 0 };
    if (descriptor.limit !== undefined) {
      const { requestsPerUnit, unit } = descriptor.limit;
      const policy = this.overridePolicy(requestsPerUnit, unit, `descriptors[${index}].limit`);
      return {
        kind: 'limit',
        rule: {
          limiter: this.overrideLimiters.get(domain.name) as Limiter,
          reported: [{ requestsPerUnit, unit }],
          maxCost: policy.maxCost,
          shadow: false,
        },
        key: JSON.stringify([domain.name, ...descriptor.entries.flatMap((e) => [e.key, e.value])]),
        cost,
        policy,
        metricRule: 'override',
      };
    }
    if (match === undefined) return { kind: 'free', limitRemaining: 0 };
    const { node } = match;
    if (node.unlimited) return { kind: 'free', limitRemaining: UNLIMITED_REMAINING };
    const rule = this.rules.get(node);
    if (rule === undefined || (replaced !== undefined && node.names.some((name) => replaced.has(name))))
      return { kind: 'free', limitRemaining: 0 };
    return { kind: 'limit', rule, key: match.key, cost, metricRule: match.metricRule };
  }
}

const NO_HEADERS: readonly Entry[] = [];

/** What one limited descriptor's policies answered, however the request was decided. */
interface Verdict {
  /** Whether the descriptor is within all of its limits (a shadow_mode rule's always is). */
  readonly within: boolean;
  readonly policies: readonly PolicyDecision[];
  /**
   * Within its limits, but nothing was taken from it, as another descriptor denied the request:
   * its policies report what would remain after this request, so what remains is one cost more.
   */
  readonly spared: boolean;
  readonly shadowDenied: boolean;
}

/** A limited descriptor's plan that a policy could admit. */
type Limited = Extract<Plan, { kind: 'limit' }>;

/** Whether a decision counted its request (and so has units to give back). */
function counted(decision: Decision): boolean {
  return decision.allowed && decision.shadowDenied !== true && decision.reason === undefined;
}

function verdictOf(decision: Decision, spared = false): Verdict {
  return {
    within: decision.allowed,
    policies: decision.policies,
    spared,
    shadowDenied: decision.shadowDenied === true,
  };
}

/**
 * Decides the descriptors of one request together: admitted only if every one is within its
 * limits, and then counted in all. The descriptors not in shadow_mode are asked in one joint call
 * (see Rules.joint), one atomic step in which a denial counts nothing. Where the store or the
 * settings cannot take that step (a Redis Cluster whose keys for them are in several slots, a
 * penalty box, whose strikes are each descriptor's own), each is asked alone, as shadow_mode rules
 * always are (they never deny): when the request is denied, the units those took are given back, a
 * second step, between which a concurrent request may see them taken, so it can be denied a little
 * early, never admitted beyond a limit. Returns each descriptor's verdict ('too-costly' for a cost
 * no policy could ever admit).
 */
async function verdicts(rules: Rules, plans: readonly Plan[]): Promise<(Verdict | 'too-costly' | undefined)[]> {
  const found = new Array<Verdict | 'too-costly' | undefined>(plans.length);
  const together: number[] = [];
  const alone: number[] = [];
  plans.forEach((plan, i) => {
    if (plan.kind === 'free') return;
    // A cost no policy could ever admit: denied outright, as envoyproxy/ratelimit does.
    if (plan.cost > plan.rule.maxCost) found[i] = 'too-costly';
    else (plan.rule.shadow ? alone : together).push(i);
  });
  const tooCostly = found.includes('too-costly');
  const parts = together.map((i) => {
    const plan = plans[i] as Limited;
    return { key: plan.key, policies: plan.policy ? [plan.policy] : plan.rule.limiter.policies, cost: plan.cost };
  });
  const joint = (together.length > 1 || (tooCostly && together.length > 0)) && rules.canDecideTogether(parts);
  if (!joint) alone.push(...together);
  // Asked at once, so that the joint call and the others go out in one batch.
  const [decided, decisions] = await Promise.all([
    joint ? rules.joint.limit(parts, tooCostly ? 'peek' : 'limit') : undefined,
    Promise.all(
      alone.map((i) => {
        const plan = plans[i] as Limited;
        return plan.rule.limiter.limit(
          plan.key,
          plan.policy ? { cost: plan.cost, policy: plan.policy } : { cost: plan.cost },
        );
      }),
    ),
  ]);
  alone.forEach((i, n) => (found[i] = verdictOf(decisions[n] as Decision)));
  if (decided) {
    const taken = decided.allowed && !tooCostly && decided.reason === undefined;
    together.forEach((i, n) => {
      const policies = decided.parts[n] as readonly PolicyDecision[];
      const within = policies.every((p) => p.allowed);
      found[i] = { within, policies, spared: within && !taken, shadowDenied: false };
    });
  }
  if (tooCostly || found.some((v) => v !== undefined && v !== 'too-costly' && !v.within)) {
    // What was decided alone is given back: the request counts nothing, shadow_mode rules included.
    await Promise.all(
      alone.map(async (i, n) => {
        const plan = plans[i] as Limited;
        const decision = decisions[n] as Decision;
        if (!counted(decision)) return;
        // A refund that fails leaves the units taken: stricter, never looser, than the limit.
        const gaveBack = await plan.rule.limiter
          .refund(plan.key, plan.cost, plan.policy ? { policy: plan.policy } : undefined)
          .catch(() => false);
        if (gaveBack) found[i] = verdictOf(decision, true);
      }),
    );
  }
  return found;
}

/** Decides one request (see verdicts) and answers it as envoyproxy/ratelimit does. */
export async function decide(
  rules: Rules,
  request: RateLimitRequest,
  options: { shadow: boolean; headers: boolean; metrics: Metrics },
): Promise<RateLimitResponse> {
  const plans = rules.plan(request);
  const found = await verdicts(rules, plans);
  const denied = found.some((v) => v === 'too-costly' || (v !== undefined && !v.within));
  const statuses = plans.map((plan, i): DescriptorStatus => {
    const verdict = found[i];
    if (plan.kind === 'free' || verdict === undefined)
      return { code: 'OK', limitRemaining: plan.kind === 'free' ? plan.limitRemaining : 0 };
    let status: DescriptorStatus;
    if (verdict === 'too-costly') {
      status = {
        code: 'OVER_LIMIT',
        currentLimit: plan.rule.reported[0],
        limitRemaining: 0,
        durationUntilResetMs: 0,
      };
    } else {
      const binding = bindingPolicy(verdict.policies);
      status = {
        code: verdict.within ? 'OK' : 'OVER_LIMIT',
        currentLimit: plan.rule.reported[verdict.policies.indexOf(binding)],
        limitRemaining: verdict.spared ? Math.min(binding.limit, binding.remaining + plan.cost) : binding.remaining,
        durationUntilResetMs: verdict.within ? binding.resetAfterMs : binding.retryAfterMs,
      };
    }
    options.metrics.descriptor(
      request.domain,
      plan.metricRule,
      status.code,
      verdict !== 'too-costly' && verdict.shadowDenied,
    );
    return status;
  });
  let responseHeadersToAdd = NO_HEADERS;
  const policies = options.headers
    ? found.flatMap((v) => (v === undefined || v === 'too-costly' ? [] : v.policies))
    : [];
  if (policies.length > 0) {
    const binding = bindingPolicy(policies);
    const fields = rateLimitHeaders({ ...binding, allowed: !denied, policies });
    responseHeadersToAdd = Object.entries(fields).map(([key, value]) => ({ key, value }));
  }
  return { overallCode: denied && !options.shadow ? 'OVER_LIMIT' : 'OK', statuses, responseHeadersToAdd };
}
