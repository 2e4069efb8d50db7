import { messageOf } from '../core/errors.js';
import type { Store } from '../index.js';
import { GrpcError, MESSAGE_START, Status, type UnaryMethod, type UnaryReply } from './grpc.js';
import { RATE_LIMIT_SERVICE } from './health.js';
import { decodeRateLimitRequest } from './protobuf.js';
import { encodeRateLimitResponse } from './protobuf-writer.js';
import { BadRequestError, type RateLimitResponse } from './messages.js';
import type { Rules } from './rules.js';
import { decide, type DecideOptions } from './service.js';

/** A store as the service's limiters use it, and the deadline of the gRPC call being decided now. */
export interface CallDeadlines {
  readonly store: Store;
  deadline: number;
}

/**
 * `store`, as the service's limiters use it: a step asked while `deadline` is set must take effect
 * before it (a performance.now() time) too, or count nothing. The limiters ask the store in the
 * same turn as a decision starts, so a gRPC call's deadline, set around that start, reaches every
 * step of its decision; a step asked later (a refund) keeps its own.
 */
export function withCallDeadlines(store: Store): CallDeadlines {
  const deadlines = {
    deadline: Infinity,
    store: {
      run: (script, keys, args, deadline = Infinity) =>
        store.run(script, keys, args, Math.min(deadline, deadlines.deadline)),
      ...(store.slotOf === undefined ? {} : { slotOf: store.slotOf }),
      ...(store.unreachable === undefined ? {} : { unreachable: store.unreachable }),
    } as Store,
  };
  // A store deciding in this process answers at once, so a deadline cannot pass: its local step is
  // kept, not enumerable, as the Store type says of runLocal.
  if (store.runLocal !== undefined) Object.defineProperty(deadlines.store, 'runLocal', { value: store.runLocal });
  return deadlines;
}

/** What a failed decision answers over gRPC: a bad request is INVALID_ARGUMENT, the rest INTERNAL. */
function grpcErrorOf(error: unknown): GrpcError {
  if (error instanceof GrpcError) return error;
  return new GrpcError(error instanceof BadRequestError ? Status.INVALID_ARGUMENT : Status.INTERNAL, messageOf(error));
}

/** Sends a decided call's response; one that cannot be encoded fails the call (UNKNOWN). */
function send(reply: UnaryReply, response: RateLimitResponse): void {
  let message: Buffer;
  try {
    message = encodeRateLimitResponse(response);
  } catch (error) {
    return reply.failWith(error);
  }
  reply.answer(message);
}

/**
 * ShouldRateLimit over gRPC, by its path: decided by the rules serving now (`rulesNow()`), each
 * call's deadline passed to the store through `deadlines`. A decision made at once is answered at
 * once; one the store is asked for is counted in flight, and its one continuation answers the call.
 */
export function shouldRateLimit(
  rulesNow: () => Rules,
  deadlines: CallDeadlines,
  options: DecideOptions,
): [string, UnaryMethod] {
  const { metrics } = options;
  const method: UnaryMethod = {
    kind: 'unary',
    answer(message, deadline, reply) {
      const request = decodeRateLimitRequest(message, MESSAGE_START);
      let decided: RateLimitResponse | Promise<RateLimitResponse>;
      deadlines.deadline = deadline;
      try {
        decided = decide(rulesNow(), request, options);
      } finally {
        deadlines.deadline = Infinity;
      }
      if (!(decided instanceof Promise)) return send(reply, decided);
      metrics.inFlight('grpc', 1);
      void decided.then(
        (response) => {
          metrics.inFlight('grpc', -1);
          send(reply, response);
        },
        (error: unknown) => {
          metrics.inFlight('grpc', -1);
          reply.failWith(grpcErrorOf(error));
        },
      );
    },
  };
  return [`/${RATE_LIMIT_SERVICE}/ShouldRateLimit`, method];
}
