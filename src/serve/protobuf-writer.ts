import type { Entry } from './match.js';
import { UNIT_NUMBERS } from './limits.js';
import { FIXED64, LENGTH, tag, VARINT } from './protobuf.js';
import type { DescriptorStatus, RateLimitResponse } from './messages.js';

// Writing sluice serve's answers in the protobuf wire format (see protobuf.ts): a message is sized
// first, then written once into one buffer that starts with room for the gRPC message header.

const UNIT_NUMBER: ReadonlyMap<string, number> = new Map(UNIT_NUMBERS.map((name, number) => [name, number]));
const CODE_NUMBERS: Readonly<Record<DescriptorStatus['code'], number>> = { OK: 1, OVER_LIMIT: 2 };

/** A value google.protobuf.Value can hold, as JSON has them. */
export type StructValue = null | boolean | number | string | readonly StructValue[] | StructFields;
/** A google.protobuf.Struct: its fields by name. */
export interface StructFields {
  readonly [name: string]: StructValue;
}

/** A RateLimitResponse as the wire carries it: the service's, and the dynamic_metadata it may add. */
export interface WireResponse extends RateLimitResponse {
  readonly dynamicMetadata?: StructFields;
}

function varintSize(value: number): number {
  if (value < 0x80) return 1;
  if (value < 0x4000) return 2;
  if (value < 0x20_0000) return 3;
  if (value < 0x1000_0000) return 4;
  let size = 5;
  for (value = Math.floor(value / 0x8_0000_0000); value > 0; value = Math.floor(value / 0x80)) size++;
  return size;
}

/**
 * A message's size is known before it is written: `measure` sizes every length-delimited part,
 * pushing each size (in the order the parts are written) for `write` to take in the same order.
 */
class Writer {
  /** The parts' sizes, `count` of them for the message being written (the array is kept, not cleared). */
  private readonly sizes: number[] = [];
  private count = 0;
  private next = 0;
  buffer: Buffer = Buffer.alloc(0);
  at = 0;

  /** Ready for the next message: one writer serves every answer, one at a time. */
  reset(): this {
    this.count = 0;
    this.next = 0;
    return this;
  }

  /** Reserves a part's size; set it with `close` once its contents are measured. */
  open(): number {
    this.sizes[this.count] = 0;
    return this.count++;
  }

  /** Records a part's size, measured since its `open`, and answers what it adds to its parent. */
  close(slot: number, field: number, size: number): number {
    this.sizes[slot] = size;
    return varintSize(tag(field, LENGTH)) + varintSize(size) + size;
  }

  /** Starts writing a part whose size was measured: its tag and length. */
  part(field: number): void {
    this.varint(tag(field, LENGTH));
    this.varint(this.sizes[this.next++] as number);
  }

  varint(value: number): void {
    const { buffer } = this;
    // Bit operations take 32 bits: beyond them, arithmetic.
    while (value > 0x7fff_ffff) {
      buffer[this.at++] = (value % 0x80) | 0x80;
      value = Math.floor(value / 0x80);
    }
    while (value >= 0x80) {
      buffer[this.at++] = (value & 0x7f) | 0x80;
      value >>>= 7;
    }
    buffer[this.at++] = value;
  }

  /** A varint field, left out at 0 as proto3 leaves a default. */
  scalar(field: number, value: number): void {
    if (value !== 0) this.field(field, value);
  }

  /** A varint field, written even at 0. */
  field(field: number, value: number): void {
    this.varint(tag(field, VARINT));
    this.varint(value);
  }

  string(field: number, text: string, size: number): void {
    this.varint(tag(field, LENGTH));
    this.varint(size);
    this.at += this.buffer.write(text, this.at, 'utf8');
  }

  double(field: number, value: number): void {
    this.varint(tag(field, FIXED64));
    this.buffer.writeDoubleLE(value, this.at);
    this.at += 8;
  }
}

const scalarSize = (field: number, value: number) => (value === 0 ? 0 : varintSize(field << 3) + varintSize(value));
const stringSize = (field: number, size: number) => varintSize(tag(field, LENGTH)) + varintSize(size) + size;

function measureValue(w: Writer, value: StructValue, path: string): number {
  if (value === null) return 2;
  switch (typeof value) {
    case 'boolean':
      return 2;
    case 'number':
      return 9;
    case 'string':
      return stringSize(3, Buffer.byteLength(value));
    case 'object': {
      const slot = w.open();
      if (Array.isArray(value)) {
        let size = 0;
        (value as readonly StructValue[]).forEach((item, i) => {
          const itemSlot = w.open();
          size += w.close(itemSlot, 1, measureValue(w, item, `${path}[${i}]`));
        });
        return w.close(slot, 6, size);
      }
      const prototype: unknown = Object.getPrototypeOf(value);
      if (prototype === Object.prototype || prototype === null)
        return w.close(slot, 5, measureStruct(w, value as StructFields, path));
      throw new TypeError(
        `${path}: a google.protobuf.Value holds a plain object as a map; got ${Object.prototype.toString.call(value)}`,
      );
    }
    default:
      throw new TypeError(
        `${path}: a google.protobuf.Value holds null, a boolean, a number, a string, a list or a map; got ${typeof value}`,
      );
  }
}

function measureStruct(w: Writer, fields: StructFields, path: string): number {
  let size = 0;
  for (const [name, value] of Object.entries(fields)) {
    const entry = w.open();
    const valueSlot = w.open();
    const valueSize = w.close(valueSlot, 2, measureValue(w, value, path ? `${path}.${name}` : name));
    size += w.close(entry, 1, stringSize(1, Buffer.byteLength(name)) + valueSize);
  }
  return size;
}

function writeValue(w: Writer, value: StructValue): void {
  // A oneof member is written even at its default: that it is set is what it says.
  if (value === null) w.field(1, 0);
  else if (typeof value === 'boolean') w.field(4, value ? 1 : 0);
  else if (typeof value === 'number') w.double(2, value);
  else if (typeof value === 'string') w.string(3, value, Buffer.byteLength(value));
  else if (Array.isArray(value)) {
    w.part(6);
    for (const item of value as readonly StructValue[]) {
      w.part(1);
      writeValue(w, item);
    }
  } else {
    w.part(5);
    writeStruct(w, value as StructFields);
  }
}

function writeStruct(w: Writer, fields: StructFields): void {
  for (const [name, value] of Object.entries(fields)) {
    w.part(1);
    w.string(1, name, Buffer.byteLength(name));
    w.part(2);
    writeValue(w, value);
  }
}

/** A google.protobuf.Duration's nanos of `ms`: whole, under a second. */
const nanosOf = (ms: number) => Math.round((ms % 1000) * 1_000_000);

/** The size of a DescriptorStatus, its parts' sizes reserved in `w`. */
function measureStatus(w: Writer, status: DescriptorStatus): number {
  let size = scalarSize(1, CODE_NUMBERS[status.code]) + scalarSize(3, status.limitRemaining);
  const limit = status.currentLimit;
  if (limit) {
    const slot = w.open();
    const name = limit.name ? stringSize(3, Buffer.byteLength(limit.name)) : 0;
    size += w.close(
      slot,
      2,
      scalarSize(1, limit.requestsPerUnit) + scalarSize(2, UNIT_NUMBER.get(limit.unit) ?? 0) + name,
    );
  }
  const ms = status.durationUntilResetMs;
  if (ms !== undefined) {
    const slot = w.open();
    size += w.close(slot, 4, scalarSize(1, Math.floor(ms / 1000)) + scalarSize(2, nanosOf(ms)));
  }
  return size;
}

function writeStatus(w: Writer, status: DescriptorStatus): void {
  w.scalar(1, CODE_NUMBERS[status.code]);
  const limit = status.currentLimit;
  if (limit) {
    w.part(2);
    w.scalar(1, limit.requestsPerUnit);
    w.scalar(2, UNIT_NUMBER.get(limit.unit) ?? 0);
    if (limit.name) w.string(3, limit.name, Buffer.byteLength(limit.name));
  }
  w.scalar(3, status.limitRemaining);
  const ms = status.durationUntilResetMs;
  if (ms !== undefined) {
    w.part(4);
    w.scalar(1, Math.floor(ms / 1000));
    w.scalar(2, nanosOf(ms));
  }
}

function headerSize(header: Entry): number {
  return stringSize(1, Buffer.byteLength(header.key)) + stringSize(2, Buffer.byteLength(header.value));
}

const writer = new Writer();

/**
 * A RateLimitResponse as a gRPC message: the 5-byte header (not compressed, its length), then the
 * protobuf. Fields at their default are left out; a message field that is set is written, even empty.
 * Throws TypeError for dynamic_metadata that a google.protobuf.Struct cannot hold.
 */
export function encodeRateLimitResponse(response: WireResponse): Buffer {
  const w = writer.reset();
  let size = scalarSize(1, CODE_NUMBERS[response.overallCode]);
  for (const status of response.statuses) {
    const slot = w.open();
    size += w.close(slot, 2, measureStatus(w, status));
  }
  for (const header of response.responseHeadersToAdd) {
    const slot = w.open();
    size += w.close(slot, 3, headerSize(header));
  }
  if (response.dynamicMetadata !== undefined) {
    const slot = w.open();
    size += w.close(slot, 6, measureStruct(w, response.dynamicMetadata, ''));
  }

  w.buffer = Buffer.allocUnsafe(5 + size);
  w.buffer[0] = 0;
  w.buffer.writeUInt32BE(size, 1);
  w.at = 5;
  w.scalar(1, CODE_NUMBERS[response.overallCode]);
  for (const status of response.statuses) {
    w.part(2);
    writeStatus(w, status);
  }
  for (const header of response.responseHeadersToAdd) {
    w.part(3);
    w.string(1, header.key, Buffer.byteLength(header.key));
    w.string(2, header.value, Buffer.byteLength(header.value));
  }
  if (response.dynamicMetadata !== undefined) {
    w.part(6);
    writeStruct(w, response.dynamicMetadata);
  }
  return w.buffer;
}

/** grpc.health.v1.HealthCheckResponse.ServingStatus */
export type ServingStatus = 'UNKNOWN' | 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';
const SERVING_NUMBERS: Readonly<Record<ServingStatus, number>> = {
  UNKNOWN: 0,
  SERVING: 1,
  NOT_SERVING: 2,
  SERVICE_UNKNOWN: 3,
};

/** A grpc.health.v1.HealthCheckResponse as a gRPC message (header included). */
export function encodeHealthCheckResponse(status: ServingStatus): Buffer {
  const number = SERVING_NUMBERS[status];
  return number === 0 ? Buffer.from([0, 0, 0, 0, 0]) : Buffer.from([0, 0, 0, 0, 2, tag(1, VARINT), number]);
}
