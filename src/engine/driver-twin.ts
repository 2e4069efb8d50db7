import type { Algorithm, Decided } from './algorithm.js';
import type { Op } from './driver.js';
import { MAX_DURATION_MS } from '../core/duration.js';
import { deleteCell, setCell, type Arg, type Cell, type Script } from './script.js';

/** ARGV's cost when each policy has its own (which follow the policies). */
export const EACH = 'each';

function parseArgs(args: readonly Arg[], algorithms: readonly Algorithm[]) {
  const n = (i: number) => Number(args[i]);
  const op = String(args[0]) as Op;
  const each = args[1] === EACH;
  const policies: { kind: Algorithm; params: number[]; cost: number; most: number; state: Decided }[] = [];
  let pos = 7;
  for (let i = 0; i < n(6); i++) {
    const kind = algorithms.find((a) => a.id === args[pos]);
    if (!kind) throw new Error(`script has no algorithm ${String(args[pos])}`);
    const count = n(pos + 1);
    const params = args.slice(pos + 2, pos + 2 + count).map(Number);
    policies.push({ kind, params, cost: each ? 0 : n(1), most: 0, state: kind.newState() });
    pos += 2 + count;
  }
  if (each) {
    const width = op === 'settle' ? 2 : 1;
    policies.forEach((policy, i) => {
      policy.cost = n(pos + i * width);
      if (width === 2) policy.most = n(pos + i * 2 + 1);
    });
  }
  return {
    op,
    target: n(2),
    ms: n(3),
    strikesToBlock: n(4),
    blockMs: n(5),
    policies,
    reply: replyBuffer(policies.length),
  };
}

/**
 * The reply of a limit or peek of `count` policies, reused from call to call as each policy's
 * state is: a decision allocates no reply. A double array from the start (NaN until written), so
 * that writing the time into it never changes its kind.
 */
function replyBuffer(count: number): number[] {
  return Array.from({ length: 3 + 5 * count }, () => Number.NaN);
}

/** As the Lua's blockedReply: denied by every policy for the block's ms. */
function blockedReply(reply: number[], now: number, blocked: number): number[] {
  reply[0] = now;
  reply[1] = 0;
  reply[2] = blocked;
  for (let at = 3; at < reply.length; at += 5) {
    reply[at] = 0;
    reply[at + 1] = 0;
    reply[at + 2] = blocked;
    reply[at + 3] = blocked;
    reply[at + 4] = 0;
  }
  return reply;
}

type ParsedPolicy = ReturnType<typeof parseArgs>['policies'][number];

/** As the Lua's takeUpTo: the policy's cost in units, or as many as fit down to `least`; extra is the units taken. */
function takeUpTo(reply: number[], now: number, cell: Cell, policy: ParsedPolicy, least: number): number[] {
  const { kind, params, cost: most, state } = policy;
  let take = most;
  kind.decide(now, cell, most, params, false, state);
  if (!state.allowed) {
    take = least;
    kind.decide(now, cell, least, params, false, state);
    const fit = state.remaining < most ? state.remaining : most - 1;
    if (state.allowed && fit > least) {
      kind.decide(now, cell, fit, params, false, state);
      if (state.allowed) take = fit;
      else kind.decide(now, cell, least, params, false, state);
    }
  }
  const allowed = state.allowed ? 1 : 0;
  reply[0] = now;
  reply[1] = allowed;
  reply[2] = 0;
  reply[3] = allowed;
  reply[6] = state.retryAfter;
  state.extra = 0;
  if (state.allowed) kind.admit(now, cell, take, params, state);
  else kind.keep(now, cell, least, params, state);
  reply[4] = Math.max(0, state.remaining);
  reply[5] = state.resetAfter;
  reply[7] = state.allowed ? take : 0;
  return reply;
}

/** The driver's TypeScript twin: the same steps, over the cells [block, (strikes), ...policies]. */
export function driverTwin(algorithms: readonly Algorithm[]): Script['twin'] {
  // As in the Lua: a limiter's calls share their args array, which is read once, and each policy's
  // state is reused call after call. Most calls repeat the last args: they skip the WeakMap.
  const parsed = new WeakMap<readonly Arg[], ReturnType<typeof parseArgs>>();
  let lastArgs: readonly Arg[] | undefined;
  let last: ReturnType<typeof parseArgs> | undefined;
  return (now, cells, args) => {
    let call = args === lastArgs ? last : parsed.get(args);
    if (call === undefined) parsed.set(args, (call = parseArgs(args, algorithms)));
    lastArgs = args;
    last = call;
    const { policies } = call;
    const first = call.strikesToBlock > 0 ? 2 : 1;
    const block = cells[0] as Cell<number>;
    if (call.op === 'block') {
      setCell(block, now + call.target, call.target);
      return [now, 1, call.target];
    }
    if (call.op === 'reset') {
      for (const cell of cells) deleteCell(cell);
      return [now, 1, 0];
    }
    if (call.op === 'refund' || call.op === 'release' || call.op === 'extend') {
      let done = 0;
      for (let i = 0; i < policies.length; i++) {
        const { kind, params, cost } = policies[i] as (typeof policies)[number];
        const cell = cells[first + i] as Cell;
        if (cost <= 0) continue;
        const changed =
          call.op === 'refund'
            ? kind.refund(now, cell, cost, params, call.target)
            : call.op === 'release'
              ? kind.release?.(now, cell, cost, params, call.target)
              : kind.extend?.(now, cell, cost, params, call.target, call.ms);
        if (changed === true) done = 1;
      }
      return [now, done, 0];
    }
    if (call.op === 'settle') {
      let done = 0;
      for (let i = 0; i < policies.length; i++) {
        const { kind, params, cost, most, state } = policies[i] as (typeof policies)[number];
        const cell = cells[first + i] as Cell;
        if (cost < 0) {
          if (kind.refund(now, cell, -cost, params, call.target)) done = 1;
        } else if (cost > 0) {
          // As in the Lua: asked at cost 0, whose remaining does not depend on the cost.
          kind.decide(now, cell, 0, params, false, state);
          const take = Math.min(cost, state.remaining + most);
          if (take > 0) {
            kind.admit(now, cell, take, params, state);
            done = 1;
          } else {
            kind.keep(now, cell, 0, params, state);
          }
        }
      }
      return [now, done, 0];
    }
    const peek = call.op === 'peek';
    const blockedUntil = block.held ? (block.value as number) : 0;
    const { reply } = call;
    // As the Lua's: a block ending further ahead than any lasts is none.
    if (blockedUntil > now && blockedUntil <= now + MAX_DURATION_MS)
      return blockedReply(reply, now, blockedUntil - now);
    if (blockedUntil > 0 && !peek) deleteCell(block);
    if (call.op === 'take') return takeUpTo(reply, now, cells[first] as Cell, policies[0] as ParsedPolicy, call.target);
    let all = true;
    for (let i = 0; i < policies.length; i++) {
      const { kind, params, cost, state } = policies[i] as (typeof policies)[number];
      kind.decide(now, cells[first + i] as Cell, cost, params, peek, state);
      all &&= state.allowed;
    }
    reply[0] = now;
    reply[1] = all ? 1 : 0;
    reply[2] = 0;
    for (let i = 0; i < policies.length; i++) {
      const { kind, params, cost, state } = policies[i] as (typeof policies)[number];
      const at = 3 + 5 * i;
      reply[at] = state.allowed ? 1 : 0;
      reply[at + 3] = state.retryAfter;
      state.extra = 0;
      if (!peek) {
        // A policy the request costs nothing is only asked (it may be in debt): nothing to count.
        if (all && cost > 0) kind.admit(now, cells[first + i] as Cell, cost, params, state);
        else kind.keep(now, cells[first + i] as Cell, cost, params, state);
      }
      reply[at + 1] = Math.max(0, state.remaining);
      reply[at + 2] = state.resetAfter;
      reply[at + 4] = state.extra;
    }
    if (!peek && call.strikesToBlock > 0) {
      const strikesCell = cells[1] as Cell<readonly [number, number]>;
      if (all) deleteCell(strikesCell);
      else {
        // As the Lua's: [denials in a row, when they are forgotten].
        const held = strikesCell.value;
        // As the Lua's, strikes forgotten further ahead than a block lasts (the clock stepped back)
        // count again from 1.
        const live = strikesCell.held && held !== undefined && held[1] > now && held[1] <= now + call.blockMs;
        const strikes = live ? held[0] + 1 : 1;
        if (strikes >= call.strikesToBlock) {
          deleteCell(strikesCell);
          setCell(block, now + call.blockMs, call.blockMs);
          // As the Lua's: the denial that starts the block answers as the block does.
          return blockedReply(reply, now, call.blockMs);
        } else setCell(strikesCell, [strikes, now + call.blockMs] as const, call.blockMs + 1);
      }
    }
    return reply;
  };
}
