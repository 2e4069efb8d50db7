import { sha1Hex } from '../core/digest.js';
import { StoreError, StorePermissionError, StoreTimeoutError, toStoreError } from '../core/errors.js';
import { afterThisTick, afterThisTurn } from '../core/host.js';
import { promiseFor, type Settlers } from '../engine/promise-settlers.js';
import { LATE } from '../engine/driver-lua.js';
import type { Arg, Reply, Script } from '../engine/script.js';
import { batchArguments, batchScript, settle, type Request } from '../engine/batch.js';
import type { Store } from '../engine/store.js';
import { watchConnection, type ConnectionWatch } from './connection.js';
import { checkEviction } from './eviction.js';
import { isCluster, scriptClient, type Evaluator, type RedisClient, type ScriptClient } from './redis-clients.js';
import { ACL_REFUSAL, isNoScript, isUnknownCommand, permissionError, storeErrorOf } from './redis-errors.js';
import { ServerClock } from './server-clock.js';
import { hashSlot } from './slot.js';

export type { RedisClient } from './redis-clients.js';

// Enough to amortise a round trip many times over while keeping one script run short (Redis
// serves nobody else while a script runs).
const MAX_BATCH = 256;

// Asks whether the server has PEXPIRETIME (Redis 7.0 and later, Valkey), on the key a call is
// about to use, so that a cluster asks the node that runs the call.
const PEXPIRETIME_PROBE_LUA = "return redis.call('PEXPIRETIME', KEYS[1])";
const PEXPIRETIME_PROBE = { lua: PEXPIRETIME_PROBE_LUA, sha: sha1Hex(PEXPIRETIME_PROBE_LUA) };

/** The form of a script that a server with or without PEXPIRETIME runs. */
function formOn(script: Script, hasPexpiretime: boolean): Script {
  return hasPexpiretime ? script : (script.withoutPexpiretime ?? script);
}

function isReply(raw: unknown): raw is Reply {
  if (!Array.isArray(raw) || raw.length < 3) return false;
  // A loop, not every(): no closure per reply, one per decision in a batch.
  for (const n of raw) if (typeof n !== 'number') return false;
  return true;
}

/** A decision's request, settled with its reply (checked) or a StoreError. */
class Pending implements Request, Settlers<Reply> {
  resolve!: (reply: Reply) => void;
  reject!: (error: unknown) => void;

  constructor(
    readonly script: Script,
    readonly keys: readonly string[],
    readonly args: readonly Arg[],
    /** The local time (performance.now()) after which it must count nothing; Infinity: none. */
    readonly deadline: number,
  ) {}

  /** Resolves with `raw` if it is a reply, else rejects: whether it was one. */
  settle(raw: unknown): boolean {
    if (isReply(raw)) {
      this.resolve(raw);
      return true;
    }
    this.reject(new StoreError(`script ${this.script.name} replied ${JSON.stringify(raw)}, not a list of integers`));
    return false;
  }

  fail(error: unknown): void {
    this.reject(toStoreError(error));
  }
}

async function evaluate(
  via: Evaluator,
  script: { readonly sha: string; readonly lua: string },
  keys: readonly string[],
  args: readonly Arg[],
) {
  try {
    return await via.evalsha(script.sha, keys, args);
  } catch (error) {
    if (!isNoScript(error)) throw error;
    return via.eval(script.lua, keys, args);
  }
}

/**
 * State in Redis: each decision is one run of its script, by EVALSHA (EVAL on NOSCRIPT). Decisions
 * asked together (in one turn of the event loop while the store is busy, one tick while it is idle)
 * go out as one EVALSHA of a batch script, per cluster slot; a lone one is sent as it is
 * (docs/architecture.md, "Stores").
 */
export function redisStore(client: RedisClient): Store {
  const redis = scriptClient(client);
  const connection = watchConnection(client);
  const cluster = isCluster(client);
  const batches = new Batches(redis, connection, cluster);
  return {
    ...(cluster ? { slotOf: hashSlot } : {}),
    ...(connection ? { unreachable: connection.failure } : {}),
    run: (script, keys, args, deadline = Infinity) => batches.run(script, keys, args, deadline),
  };
}

/** A Redis store's calls: queued, sent together in batches, and their replies read. */
class Batches {
  private readonly clock = new ServerClock();
  // Checked on the first call, when the client is connected, not at construction, when it may not be.
  private evictionChecked = false;
  private readonly groupOf: (keys: readonly string[]) => number;
  private queued = new Map<Script, Map<number, Pending[]>>();
  // Commands sent and not answered yet.
  private unanswered = 0;
  // Whether the calls last sent at the end of a turn were more than one: requests are arriving
  // together, so the first call of a turn waits for the others too (sent at once, it would make
  // each turn cost a lone command besides the batch).
  private gathering = false;
  // Whether the server has PEXPIRETIME: asked once, by the first call of a script that calls it
  // (again by the next one if asking failed).
  private pexpiretime: boolean | Promise<boolean> | undefined;

  constructor(
    private readonly redis: ScriptClient,
    private readonly connection: ConnectionWatch | undefined,
    cluster: boolean,
  ) {
    this.groupOf = cluster ? (keys: readonly string[]) => hashSlot(keys[0] ?? '') : () => 0;
  }

  run(script: Script, keys: readonly string[], args: readonly Arg[], deadline: number): Promise<Reply> {
    if (!this.evictionChecked) {
      this.evictionChecked = true;
      if (this.redis.memoryInfo) checkEviction(this.redis.memoryInfo);
    }
    const { pexpiretime } = this;
    if (typeof pexpiretime === 'boolean' || script.withoutPexpiretime === undefined)
      return this.decide(formOn(script, pexpiretime !== false), keys, args, deadline);
    const asked = pexpiretime ?? this.askPexpiretime(keys[0] ?? '');
    return asked.then((has) => this.decide(formOn(script, has), keys, args, deadline));
  }

  /** The earliest of the requests' deadlines in the server's time, as the script's argument ('0': none, or not known yet). */
  private serverDeadline(requests: readonly Pending[]): string {
    let earliest = Infinity;
    for (const request of requests) if (request.deadline < earliest) earliest = request.deadline;
    return String(earliest === Infinity ? 0 : (this.clock.serverTime(earliest) ?? 0));
  }

  private askPexpiretime(key: string): Promise<boolean> {
    const asked = evaluate(this.redis, PEXPIRETIME_PROBE, [key], []).then(
      () => (this.pexpiretime = true),
      (error: unknown) => {
        if (isUnknownCommand(error)) return (this.pexpiretime = false);
        this.pexpiretime = undefined;
        throw this.failure(error, [key], PEXPIRETIME_PROBE.lua);
      },
    );
    this.pexpiretime = asked;
    return asked;
  }

  private decide(script: Script, keys: readonly string[], args: readonly Arg[], deadline: number): Promise<Reply> {
    const request = new Pending(script, keys, args, deadline);
    const reply = promiseFor(request);
    this.enqueue(request);
    return reply;
  }

  /** A failed call's error, typed; a late call's refusal also tells the server's time. */
  private failure(error: unknown, keys: readonly string[], lua: string): StoreError {
    const message = error instanceof Error ? error.message : '';
    if (!message.startsWith(`${LATE} `)) {
      const typed = storeErrorOf(error, keys, lua);
      return typed instanceof StorePermissionError ? typed : (this.connection?.explain(error) ?? typed);
    }
    this.clock.observe(Number(message.split(' ', 2)[1]));
    return new StoreTimeoutError(`the call reached Redis after its deadline and counted nothing: ${message}`, {
      cause: error,
    });
  }

  private sendOne(script: Script, request: Pending, deadline: string): void {
    this.unanswered++;
    evaluate(this.redis, script, request.keys, [...request.args, deadline]).then(
      (raw) => {
        this.unanswered--;
        // Every reply names the server's time when the script ran (see Reply).
        if (request.settle(raw)) this.clock.observe((raw as Reply)[0] as number);
      },
      (error: unknown) => {
        this.unanswered--;
        request.fail(this.failure(error, request.keys, script.lua));
      },
    );
  }

  private send(script: Script, requests: readonly Pending[]): void {
    const deadline = this.serverDeadline(requests);
    const [first] = requests;
    if (requests.length === 1 && first) return this.sendOne(script, first, deadline);
    const { keys, args, order } = batchArguments(requests, deadline);
    const { binary } = this.redis;
    const batch = batchScript(script, binary !== undefined);
    this.unanswered++;
    evaluate(binary ?? this.redis, batch, keys, args).then(
      (raw) => {
        this.unanswered--;
        const now = settle(order, raw, (message) =>
          ACL_REFUSAL.test(message) ? permissionError(message, keys, batch.lua) : new StoreError(message),
        );
        // The time of every reply in the batch, learned once.
        if (now !== undefined) this.clock.observe(now);
      },
      (error: unknown) => {
        this.unanswered--;
        const reason = this.failure(error, keys, batch.lua);
        requests.forEach((request) => request.fail(reason));
      },
    );
  }

  /** Sends every queued call; returns how many. */
  private readonly flush = (): number => {
    const batches = this.queued;
    this.queued = new Map();
    let calls = 0;
    for (const [script, groups] of batches) {
      for (const requests of groups.values()) {
        calls += requests.length;
        for (let i = 0; i < requests.length; i += MAX_BATCH) this.send(script, requests.slice(i, i + MAX_BATCH));
      }
    }
    return calls;
  };

  private readonly flushTurn = (): void => {
    this.gathering = this.flush() > 1;
  };

  private enqueue(request: Pending): void {
    // A server reads each request in a callback of its own, so the calls of requests that arrive
    // together meet only at the end of the event loop's turn: a busy server's calls wait for it and
    // share a command. A lone call only loses by waiting (bench/NOTES.md), so while the store
    // is idle (no command out, no gathering) calls go at the end of their tick, with those made
    // beside them (limitMany, Promise.all).
    if (this.queued.size === 0) {
      if (this.unanswered === 0 && !this.gathering) afterThisTick(this.flush);
      else afterThisTurn(this.flushTurn);
    }
    let groups = this.queued.get(request.script);
    if (groups === undefined) this.queued.set(request.script, (groups = new Map<number, Pending[]>()));
    const group = this.groupOf(request.keys);
    const requests = groups.get(group);
    if (requests === undefined) groups.set(group, [request]);
    else requests.push(request);
  }
}
