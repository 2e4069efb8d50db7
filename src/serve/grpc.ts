import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import type { ReportedLimit, UnitName } from './limits.js';
import type { JsonObject, JsonValue } from './metadata.js';
import { messageOf } from '../core/errors.js';
import { BadRequestError, type RateLimitRequest, type RateLimitResponse, type RequestDescriptor } from './messages.js';

/** The .proto sluice serve speaks; it ships beside this module. */
const PROTO_PATH = fileURLToPath(new URL('./proto/ratelimit.proto', import.meta.url));

/** Field names in camelCase, enums as their names, 64-bit integers as numbers: as the JSON mapping has them. */
const LOADER_OPTIONS = { keepCase: false, longs: Number, enums: String, defaults: false, oneofs: true } as const;

interface ServiceConstructor {
  readonly service: grpc.ServiceDefinition;
}

/** The RateLimitService definition, for a server or a client. */
export function rateLimitService(): grpc.ServiceClientConstructor {
  const loaded = grpc.loadPackageDefinition(loadSync(PROTO_PATH, LOADER_OPTIONS)) as unknown as {
    envoy: { service: { ratelimit: { v3: { RateLimitService: grpc.ServiceClientConstructor } } } };
  };
  return loaded.envoy.service.ratelimit.v3.RateLimitService;
}

interface WireRequest {
  domain?: string;
  descriptors?: {
    entries?: { key?: string; value?: string }[];
    limit?: { requestsPerUnit?: number; unit?: string };
    hitsAddend?: { value?: number };
  }[];
  hitsAddend?: number;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

// Objects are built field by field: each conditional spread would allocate and copy one more, per call.

/** A decoded request as the service takes it: proto3's absent fields are their defaults. */
function fromWire(wire: WireRequest): RateLimitRequest {
  return {
    domain: wire.domain ?? '',
    hitsAddend: wire.hitsAddend ?? 0,
    descriptors: (wire.descriptors ?? []).map((d) => {
      const descriptor: Mutable<RequestDescriptor> = {
        entries: (d.entries ?? []).map((e) => ({ key: e.key ?? '', value: e.value ?? '' })),
      };
      if (d.limit)
        descriptor.limit = {
          requestsPerUnit: d.limit.requestsPerUnit ?? 0,
          unit: (d.limit.unit ?? 'UNKNOWN') as UnitName,
        };
      if (d.hitsAddend) descriptor.hitsAddend = d.hitsAddend.value ?? 0;
      return descriptor;
    }),
  };
}

interface WireStatus {
  code: string;
  currentLimit?: ReportedLimit;
  limitRemaining: number;
  durationUntilReset?: { seconds: number; nanos: number };
}

/** A google.protobuf.Value as protobufjs takes it. */
function valueToWire(value: JsonValue): Record<string, unknown> {
  if (value === null) return { nullValue: 'NULL_VALUE' };
  if (typeof value === 'boolean') return { boolValue: value };
  if (typeof value === 'number') return { numberValue: value };
  if (typeof value === 'string') return { stringValue: value };
  if (Array.isArray(value)) return { listValue: { values: value.map(valueToWire) } };
  return { structValue: structToWire(value as JsonObject) };
}

function structToWire(object: JsonObject): { fields: Record<string, unknown> } {
  return { fields: Object.fromEntries(Object.entries(object).map(([key, value]) => [key, valueToWire(value)])) };
}

function toWire(response: RateLimitResponse) {
  return {
    ...(response.dynamicMetadata && { dynamicMetadata: structToWire(response.dynamicMetadata) }),
    overallCode: response.overallCode,
    statuses: response.statuses.map((s) => {
      const status: WireStatus = { code: s.code, limitRemaining: s.limitRemaining };
      if (s.currentLimit) status.currentLimit = s.currentLimit;
      if (s.durationUntilResetMs !== undefined)
        status.durationUntilReset = {
          seconds: Math.floor(s.durationUntilResetMs / 1000),
          nanos: (s.durationUntilResetMs % 1000) * 1_000_000,
        };
      return status;
    }),
    responseHeadersToAdd: response.responseHeadersToAdd,
  };
}

/** Starts the gRPC server on `host:port` (0: any free port) and resolves with it and its port. */
export async function startGrpc(
  decide: (request: RateLimitRequest) => Promise<RateLimitResponse>,
  host: string,
  port: number,
): Promise<{ server: grpc.Server; port: number }> {
  // Channelz (gRPC's introspection service, which sluice does not serve) would time every call.
  const server = new grpc.Server({ 'grpc.enable_channelz': 0 });
  const service = rateLimitService() as unknown as ServiceConstructor;
  server.addService(service.service, {
    ShouldRateLimit(call: grpc.ServerUnaryCall<WireRequest, unknown>, callback: grpc.sendUnaryData<unknown>) {
      decide(fromWire(call.request)).then(
        (response) => callback(null, toWire(response)),
        (error: unknown) => {
          const code = error instanceof BadRequestError ? grpc.status.INVALID_ARGUMENT : grpc.status.INTERNAL;
          callback({ code, details: messageOf(error) });
        },
      );
    },
  });
  const bound = await new Promise<number>((resolve, reject) => {
    server.bindAsync(
      `${host.includes(':') ? `[${host}]` : host}:${port}`,
      grpc.ServerCredentials.createInsecure(),
      (error, actual) => (error ? reject(error) : resolve(actual)),
    );
  });
  return { server, port: bound };
}

/** Stops taking calls, and resolves once those in flight are answered. */
export function stopGrpc(server: grpc.Server): Promise<void> {
  return new Promise((resolve) => server.tryShutdown(() => resolve()));
}
