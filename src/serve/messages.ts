import type { ReportedLimit, UnitName } from './limits.js';
import type { Entry } from './match.js';
import type { JsonObject } from './metadata.js';

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
  /** With responseDynamicMetadata: the request and the admitting rules' metadata (a Struct on the wire). */
  readonly dynamicMetadata?: JsonObject;
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
