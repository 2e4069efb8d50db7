import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { MalformedMessageError, decodeHealthCheckRequest, decodeRateLimitRequest } from '../../src/serve/protobuf.js';
import {
  encodeRateLimitResponse,
  type StructFields,
  type StructValue,
  type WireResponse,
} from '../../src/serve/protobuf-writer.js';
import { rateLimitService } from '../support/rls.js';

// sluice serve's protobuf by hand, against protobufjs (through @grpc/proto-loader, with the
// service's .proto): what one writes, the other reads the same.

interface Serializers {
  requestSerialize(value: object): Buffer;
  responseDeserialize(bytes: Buffer): Record<string, unknown>;
}
const wire = (rateLimitService() as unknown as { service: { ShouldRateLimit: Serializers } }).service.ShouldRateLimit;

const UNITS = ['UNKNOWN', 'SECOND', 'MINUTE', 'HOUR', 'DAY', 'MONTH', 'YEAR'] as const;
const uint32 = fc.nat({ max: 0xffff_ffff });
const text = fc.string({ unit: 'grapheme', maxLength: 12 });

const descriptorArbitrary = fc.record(
  {
    entries: fc.array(fc.record({ key: text, value: text }, { noNullPrototype: true }), { maxLength: 3 }),
    limit: fc.record({ requestsPerUnit: uint32, unit: fc.constantFrom(...UNITS) }, { noNullPrototype: true }),
    hitsAddend: fc.record({ value: fc.maxSafeNat() }, { noNullPrototype: true }),
  },
  { requiredKeys: ['entries'], noNullPrototype: true },
);
const requestArbitrary = fc.record(
  { domain: text, descriptors: fc.array(descriptorArbitrary, { maxLength: 3 }), hitsAddend: uint32 },
  { noNullPrototype: true },
);

const structValue: fc.Arbitrary<StructValue> = fc.letrec<{ value: StructValue }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constant(null),
    fc.boolean(),
    fc.double(),
    text,
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(text, tie('value'), { maxKeys: 3, noNullPrototype: true }),
  ),
})).value;

const responseArbitrary: fc.Arbitrary<WireResponse> = fc.record(
  {
    overallCode: fc.constantFrom('OK', 'OVER_LIMIT'),
    statuses: fc.array(
      fc.record(
        {
          code: fc.constantFrom('OK', 'OVER_LIMIT'),
          currentLimit: fc.record(
            {
              requestsPerUnit: uint32,
              unit: fc.constantFrom('UNKNOWN', 'SECOND', 'MINUTE', 'HOUR', 'DAY'),
              name: text,
            },
            { requiredKeys: ['requestsPerUnit', 'unit'], noNullPrototype: true },
          ),
          limitRemaining: uint32,
          durationUntilResetMs: fc.nat({ max: 400 * 86_400_000 }),
        },
        { requiredKeys: ['code', 'limitRemaining'], noNullPrototype: true },
      ),
      { maxLength: 3 },
    ),
    responseHeadersToAdd: fc.array(fc.record({ key: text, value: text }, { noNullPrototype: true }), { maxLength: 3 }),
    dynamicMetadata: fc.dictionary(text, structValue, { maxKeys: 4, noNullPrototype: true }),
  },
  { requiredKeys: ['overallCode', 'statuses', 'responseHeadersToAdd'], noNullPrototype: true },
);

/** A google.protobuf.Value as protobufjs reads it (oneof `kind` named), back to its JSON value. */
function fromValue(value: Record<string, unknown>): StructValue {
  switch (value.kind) {
    case 'nullValue':
      return null;
    case 'numberValue':
      return value.numberValue as number;
    case 'stringValue':
      return value.stringValue as string;
    case 'boolValue':
      return value.boolValue as boolean;
    case 'listValue':
      return ((value.listValue as { values?: Record<string, unknown>[] }).values ?? []).map(fromValue);
    default:
      return fromStruct(value.structValue as { fields?: Record<string, Record<string, unknown>> });
  }
}

function fromStruct(struct: { fields?: Record<string, Record<string, unknown>> }): StructFields {
  return Object.fromEntries(Object.entries(struct.fields ?? {}).map(([name, value]) => [name, fromValue(value)]));
}

describe("sluice serve's protobuf", () => {
  it('reads every RateLimitRequest protobufjs writes', () => {
    fc.assert(
      fc.property(requestArbitrary, (request) => {
        const decoded = decodeRateLimitRequest(wire.requestSerialize(request));
        assert.deepEqual(decoded, {
          domain: request.domain,
          hitsAddend: request.hitsAddend,
          descriptors: request.descriptors.map((d) => ({
            entries: d.entries,
            ...(d.limit ? { limit: d.limit } : {}),
            ...(d.hitsAddend ? { hitsAddend: d.hitsAddend.value } : {}),
          })),
        });
      }),
    );
  });

  it('writes every RateLimitResponse as protobufjs reads it, dynamic_metadata included', () => {
    fc.assert(
      fc.property(responseArbitrary, (response) => {
        const bytes = encodeRateLimitResponse(response);
        assert.deepEqual([bytes[0], bytes.readUInt32BE(1)], [0, bytes.length - 5]);
        const read = wire.responseDeserialize(bytes.subarray(5));
        const { dynamicMetadata, ...rest } = read;
        assert.deepEqual(
          {
            ...rest,
            dynamicMetadata:
              dynamicMetadata === undefined
                ? undefined
                : fromStruct(dynamicMetadata as { fields?: Record<string, Record<string, unknown>> }),
          },
          {
            // proto3 leaves a field at its default off the wire (and protobufjs an empty list out).
            overallCode: response.overallCode,
            ...(response.statuses.length === 0
              ? {}
              : {
                  statuses: response.statuses.map((s) => ({
                    code: s.code,
                    ...(s.currentLimit
                      ? {
                          currentLimit: {
                            ...(s.currentLimit.requestsPerUnit
                              ? { requestsPerUnit: s.currentLimit.requestsPerUnit }
                              : {}),
                            ...(s.currentLimit.unit !== 'UNKNOWN' ? { unit: s.currentLimit.unit } : {}),
                            ...(s.currentLimit.name ? { name: s.currentLimit.name } : {}),
                          },
                        }
                      : {}),
                    ...(s.limitRemaining ? { limitRemaining: s.limitRemaining } : {}),
                    ...(s.durationUntilResetMs === undefined
                      ? {}
                      : {
                          durationUntilReset: {
                            ...(s.durationUntilResetMs >= 1000
                              ? { seconds: Math.floor(s.durationUntilResetMs / 1000) }
                              : {}),
                            ...(s.durationUntilResetMs % 1000 ? { nanos: (s.durationUntilResetMs % 1000) * 1e6 } : {}),
                          },
                        }),
                  })),
                }),
            ...(response.responseHeadersToAdd.length === 0
              ? {}
              : { responseHeadersToAdd: response.responseHeadersToAdd }),
            dynamicMetadata: response.dynamicMetadata,
          },
        );
      }),
    );
  });

  it('skips fields it does not know and fields of another wire type, and refuses bytes that are no message', () => {
    // domain "d"; an unknown varint (field 9), fixed64 (10), fixed32 (11), group (12 with a varint inside),
    // bytes (13); then domain sent as a varint, which is another wire type for field 1: skipped, as Go does.
    const known = Buffer.from([0x0a, 0x01, 0x64]);
    const unknown = Buffer.from([
      0x48, 0x96, 0x01, 0x51, 1, 2, 3, 4, 5, 6, 7, 8, 0x5d, 1, 2, 3, 4, 0x63, 0x08, 0x01, 0x64, 0x6a, 0x02, 0x61, 0x62,
      0x08, 0x05,
    ]);
    assert.deepEqual(decodeRateLimitRequest(Buffer.concat([known, unknown])), {
      domain: 'd',
      descriptors: [],
      hitsAddend: 0,
    });
    // hits_addend given as a 10-byte varint (a negative int64): a uint32 keeps its low 32 bits.
    const negative = Buffer.from([0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    assert.equal(decodeRateLimitRequest(negative).hitsAddend, 0xffff_ffff);
    assert.equal(decodeHealthCheckRequest(Buffer.from([0x0a, 0x02, 0x68, 0x69])), 'hi');
    for (const [bytes, problem] of [
      [Buffer.from([0x0a, 0x05, 0x61]), 'a field runs past the end of its message'],
      [Buffer.from([0x18, 0xff]), 'a message ends inside a field'],
      [Buffer.from([0x18, ...new Array<number>(10).fill(0xff), 0x01]), 'a varint longer than 10 bytes'],
      [Buffer.from([0x02, 0x00]), 'a field numbered 0'],
      [Buffer.from([0x0f]), 'wire type 7'],
      [Buffer.from([0x63, 0x08, 0x01]), 'a group without its end'],
    ] as const)
      assert.throws(
        () => decodeRateLimitRequest(bytes),
        (error: unknown) =>
          error instanceof MalformedMessageError && error.message === `grpc: error unmarshalling request: ${problem}`,
      );
  });

  it('refuses dynamic_metadata that a google.protobuf.Struct cannot hold, naming where', () => {
    const response = (dynamicMetadata: unknown): WireResponse => ({
      overallCode: 'OK',
      statuses: [],
      responseHeadersToAdd: [],
      dynamicMetadata: dynamicMetadata as StructFields,
    });
    assert.throws(() => encodeRateLimitResponse(response({ a: { b: [1, undefined] } })), {
      name: 'TypeError',
      message:
        'a.b[1]: a google.protobuf.Value holds null, a boolean, a number, a string, a list or a map; got undefined',
    });
    assert.throws(() => encodeRateLimitResponse(response({ when: new Date(0) })), {
      name: 'TypeError',
      message: 'when: a google.protobuf.Value holds a plain object as a map; got [object Date]',
    });
  });
});
