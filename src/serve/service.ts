import { bindingPolicy } from '../core/binding.js';
import {
  rateLimitHeaders,
  type Decision,
  type JointDecision,
  type JointPart,
  type LimitOptions,
  type Outcome,
  type PolicyDecision,
} from '../index.js';
import type { ServiceRecorder } from './dashboard.js';
import type { Entry } from './match.js';
import type { DescriptorStatus, RateLimitRequest, RateLimitResponse } from './messages.js';
import { mergeMetadata, type JsonObject, type JsonValue } from './metadata.js';
import type { Metrics } from './metrics.js';
import type { CallDeadlines } from './rate-limit.js';
import type { Plan, Rules } from './rules.js';

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

/** A limited descriptor's options for its rule's limiter: none at cost 1 (most requests), so none are read. */
function optionsOf({ cost, policy }: Limited): LimitOptions | undefined {
  return policy ? { cost, policy } : cost === 1 ? undefined : { cost };
}

/** A limited descriptor asked of its rule's own limiter. */
function askAlone(plan: Limited): Promise<Decision> {
  return plan.rule.limiter.limit(plan.key, optionsOf(plan));
}

/** The joint call's parts: each descriptor's key, policies and cost. */
function partsOf(plans: readonly Plan[], together: readonly number[]): JointPart[] {
  return together.map((i) => {
    const plan = plans[i] as Limited;
    return { key: plan.key, policies: plan.policy ? [plan.policy] : plan.rule.limiter.policies, cost: plan.cost };
  });
}

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

/** A request's limited descriptors (their indexes in its plans) by how each is decided. */
interface Groups {
  /** Neither leased nor in shadow_mode: one joint step where they can be. */
  readonly together: number[];
  /** In shadow_mode (which never denies), not leased: each asked of its own limiter. */
  readonly alone: number[];
  /** A rule with `lease`: each asked of its leased limiter, before the others. */
  readonly leased: number[];
  /** Whether a `refuse` plan not in shadow_mode denies the request whatever the counts. */
  readonly refused: boolean;
}

function groupsOf(plans: readonly Plan[]): Groups {
  const together: number[] = [];
  const alone: number[] = [];
  const leased: number[] = [];
  let refused = false;
  for (let i = 0; i < plans.length; i++) {
    const plan = plans[i] as Plan;
    if (plan.kind === 'refuse') refused ||= !plan.shadow;
    else if (plan.kind === 'limit') (plan.rule.leased ? leased : plan.rule.shadow ? alone : together).push(i);
  }
  return { together, alone, leased, refused };
}

/**
 * Asks each of `indexes` of its rule's own limiter, all at once: their decisions go in `asked`,
 * their verdicts in `found`. Resolves whether every one is within its limits.
 */
async function askEach(
  plans: readonly Plan[],
  indexes: readonly number[],
  asked: (Decision | undefined)[],
  found: (Verdict | undefined)[],
): Promise<boolean> {
  if (indexes.length === 0) return true;
  const ask = (i: number) => askAlone(plans[i] as Limited);
  // One descriptor in the group (a leased one beside others, say): without the array and promises
  // that gathering them takes.
  const decisions = indexes.length === 1 ? [await ask(indexes[0] as number)] : await Promise.all(indexes.map(ask));
  let within = true;
  indexes.forEach((i, n) => {
    const decision = decisions[n] as Decision;
    asked[i] = decision;
    found[i] = verdictOf(decision);
    within &&= decision.allowed;
  });
  return within;
}

/**
 * Gives back what the descriptors of `indexes` took for a request that is denied: it counts
 * nothing, shadow_mode rules included. A leased descriptor's units go back to the store, where
 * its decision charged them, as refund() gives them (docs/leases.md).
 */
async function giveBack(
  plans: readonly Plan[],
  indexes: readonly number[],
  asked: readonly (Decision | undefined)[],
  found: (Verdict | undefined)[],
): Promise<void> {
  await Promise.all(
    indexes.map(async (i) => {
      const plan = plans[i] as Limited;
      const decision = asked[i] as Decision;
      if (!counted(decision)) return;
      // A refund that fails leaves the units taken: stricter, never looser, than the limit.
      const gaveBack = await plan.rule.limiter
        .refund(plan.key, plan.cost, plan.policy ? { policy: plan.policy, decision } : { decision })
        .catch(() => false);
      if (gaveBack) found[i] = verdictOf(decision, true);
    }),
  );
}

/**
 * Decides the limited descriptors of one request together: admitted only if every descriptor is
 * within its limits, and then counted in all; returns each `limit` plan's verdict. Leased ones go
 * first, mostly from this process's leases; a denial among them makes the rest a peek. Those
 * neither leased nor in shadow_mode are then one joint call (Rules.joint), an atomic step; where it
 * cannot be one (keys in several cluster slots, a penalty box), each is asked alone. A denial gives
 * back what the descriptors asked alone or leased took, a second step that may deny early, never
 * admit too much (docs/service.md).
 */
async function verdicts(
  rules: Rules,
  plans: readonly Plan[],
  callDeadlines: CallDeadlines | undefined,
): Promise<(Verdict | undefined)[]> {
  const found = new Array<Verdict | undefined>(plans.length);
  const asked = new Array<Decision | undefined>(plans.length);
  const { together, alone, leased, ...groups } = groupsOf(plans);
  let { refused } = groups;
  // Leased descriptors take a turn: the call's deadline (read now) is set again while the store
  // steps that follow start, as the store reads it in the turn a step starts (see withCallDeadlines).
  const deadline = callDeadlines?.deadline ?? Infinity;
  if (leased.length > 0 && !(await askEach(plans, leased, asked, found))) refused = true;
  const parts = together.length > 1 || (refused && together.length > 0) ? partsOf(plans, together) : undefined;
  const joint = parts !== undefined && rules.canDecideTogether(parts);
  if (!joint) alone.push(...together);
  // Asked at once, so that the joint call and the others go out in one batch.
  if (callDeadlines !== undefined) callDeadlines.deadline = deadline;
  let asking: Promise<[JointDecision | undefined, boolean]>;
  try {
    asking = joint
      ? Promise.all([refused ? rules.joint.peek(parts) : rules.joint.limit(parts), askEach(plans, alone, asked, found)])
      : askEach(plans, alone, asked, found).then((within) => [undefined, within]);
  } finally {
    if (callDeadlines !== undefined) callDeadlines.deadline = Infinity;
  }
  const [decided] = await asking;
  if (decided) {
    const taken = decided.allowed && !refused && decided.reason === undefined;
    together.forEach((i, n) => {
      const policies = decided.parts[n] as readonly PolicyDecision[];
      const within = policies.every((p) => p.allowed);
      found[i] = { within, policies, spared: within && !taken, shadowDenied: false };
    });
  }
  if (refused || found.some((v) => v !== undefined && !v.within))
    await giveBack(plans, leased.length === 0 ? alone : [...alone, ...leased], asked, found);
  return found;
}

/** A descriptor's status, from its plan and, for a limited one, its verdict. */
function statusOf(plan: Plan, verdict: Verdict | undefined): DescriptorStatus {
  if (plan.kind === 'free') return { code: 'OK', limitRemaining: plan.limitRemaining };
  if (plan.kind === 'refuse')
    return {
      code: plan.shadow ? 'OK' : 'OVER_LIMIT',
      currentLimit: plan.reported,
      limitRemaining: 0,
      durationUntilResetMs: plan.resetAfterMs,
    };
  if (verdict === undefined) return { code: 'OK', limitRemaining: 0 };
  const binding = bindingPolicy(verdict.policies);
  return {
    code: verdict.within ? 'OK' : 'OVER_LIMIT',
    currentLimit: plan.rule.reported[verdict.policies.indexOf(binding)],
    limitRemaining: verdict.spared ? Math.min(binding.limit, binding.remaining + plan.cost) : binding.remaining,
    durationUntilResetMs: verdict.within ? binding.resetAfterMs : binding.retryAfterMs,
  };
}

/**
 * envoyproxy/ratelimit's dynamic_metadata: the request's domain, descriptors and hits_addend, and
 * the `metadata` of every rule that admitted its descriptor, merged in the request's order.
 */
function dynamicMetadataOf(
  request: RateLimitRequest,
  plans: readonly Plan[],
  statuses: readonly DescriptorStatus[],
): JsonObject {
  const fields: Record<string, JsonValue> = {
    domain: request.domain,
    descriptors: request.descriptors.map((d) => {
      const described: Record<string, JsonValue> = { entries: d.entries.map((e) => `${e.key}=${e.value}`) };
      if (d.limit) described.limit = `requests_per_unit:${d.limit.requestsPerUnit} unit:${d.limit.unit}`;
      if (d.hitsAddend !== undefined) described.hitsAddend = d.hitsAddend;
      return described;
    }),
  };
  if (request.hitsAddend !== 0) fields.hitsAddend = request.hitsAddend;
  const merged: Record<string, JsonValue> = {};
  plans.forEach((plan, i) => {
    if (plan.metadata !== undefined && statuses[i]?.code === 'OK') mergeMetadata(merged, plan.metadata);
  });
  if (Object.keys(merged).length > 0) fields.metadata = merged;
  return fields;
}

/** A descriptor's outcome on the dashboard, as the service answered it: denied only when OVER_LIMIT. */
function outcomeOf(code: DescriptorStatus['code'], shadowDenied: boolean, globalShadow: boolean): Outcome {
  if (code === 'OVER_LIMIT') return globalShadow ? 'shadowDenied' : 'denied';
  return shadowDenied ? 'shadowDenied' : 'admitted';
}

/** How the service answers: global shadow mode, RateLimit headers, dynamic_metadata, and where it counts. */
export interface DecideOptions {
  readonly shadow: boolean;
  readonly headers: boolean;
  readonly dynamicMetadata: boolean;
  readonly metrics: Metrics;
  /** The dashboard's recorder (`--dashboard`): told each limited descriptor's outcome, by rule and key. */
  readonly dashboard?: ServiceRecorder | undefined;
  /** Where a gRPC call's deadline is set while its decision starts (withCallDeadlines). */
  readonly callDeadlines?: CallDeadlines | undefined;
}

/**
 * Decides one request (see verdicts) and answers it as envoyproxy/ratelimit does: at once when its
 * one limited descriptor's store decides in this process (limitNow), else a promise. Never throws:
 * a bad request rejects. A lone limited descriptor (most requests) is its own limiter's decision,
 * without verdicts' groups and steps: alone, it is never part of a joint step, and a denial took
 * nothing to give back.
 */
export function decide(
  rules: Rules,
  request: RateLimitRequest,
  options: DecideOptions,
): RateLimitResponse | Promise<RateLimitResponse> {
  try {
    const plans = rules.plan(request);
    const only = plans.length === 1 ? (plans[0] as Plan) : undefined;
    if (only?.kind !== 'limit')
      return verdicts(rules, plans, options.callDeadlines).then((found) => answerOf(request, plans, found, options));
    const { limiter } = only.rule;
    // No promise between a call and its answer where none is needed: each costs every call under load.
    if (limiter.limitNow !== undefined)
      return answerOf(request, plans, [verdictOf(limiter.limitNow(only.key, optionsOf(only)))], options);
    return askAlone(only).then((decision) => answerOf(request, plans, [verdictOf(decision)], options));
  } catch (error) {
    return Promise.reject(error);
  }
}

/** The response to a request whose limited descriptors' verdicts are `found`; counted in metrics and the dashboard. */
function answerOf(
  request: RateLimitRequest,
  plans: readonly Plan[],
  found: readonly (Verdict | undefined)[],
  options: DecideOptions,
): RateLimitResponse {
  const statuses = new Array<DescriptorStatus>(plans.length);
  let denied = false;
  for (let i = 0; i < plans.length; i++) {
    const plan = plans[i] as Plan;
    const status = statusOf(plan, found[i]);
    statuses[i] = status;
    denied ||= status.code === 'OVER_LIMIT';
    if (plan.kind !== 'free') {
      const shadowDenied = plan.kind === 'refuse' ? plan.shadow : found[i]?.shadowDenied === true;
      options.metrics.descriptor(request.domain, plan.metricRule, status.code, shadowDenied);
      options.dashboard
        ?.seriesOf(`${request.domain}.${plan.metricRule}`)
        .count(
          plan.kind === 'limit' ? plan.key : undefined,
          outcomeOf(status.code, shadowDenied, options.shadow),
          Date.now(),
        );
    }
  }
  const response = {
    overallCode: denied && !options.shadow ? 'OVER_LIMIT' : 'OK',
    statuses,
    responseHeadersToAdd: options.headers ? headersOf(found, denied) : NO_HEADERS,
  } as const;
  return options.dynamicMetadata
    ? { ...response, dynamicMetadata: dynamicMetadataOf(request, plans, statuses) }
    : response;
}

/** The draft RateLimit headers of the request's binding policy, or none when no descriptor is limited. */
function headersOf(found: readonly (Verdict | undefined)[], denied: boolean): readonly Entry[] {
  const policies = found.flatMap((v) => (v === undefined ? [] : v.policies));
  if (policies.length === 0) return NO_HEADERS;
  const binding = bindingPolicy(policies);
  const fields = rateLimitHeaders({ ...binding, allowed: !denied, policies });
  return Object.entries(fields).map(([key, value]) => ({ key, value }));
}
