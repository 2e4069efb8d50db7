import type { UnitName } from './config.js';
import { GrpcError, Status } from './grpc.js';
import type { Entry } from './match.js';
import type { DescriptorStatus, RateLimitRequest, RateLimitResponse, RequestDescriptor } from './service.js';

// The protobuf wire format (protobuf.dev/programming-guides/encoding) of the messages sluice serve
// speaks, by hand: src/serve/proto/ratelimit.proto's field numbers, and google.protobuf.Struct's.
// A request is read field by field from its bytes; an answer is sized, then written once into one
// buffer that starts with room for the gRPC message header.

const VARINT = 0;
const FIXED64 = 1;
const LENGTH = 2;
const START_GROUP = 3;
const END_GROUP = 4;
const FIXED32 = 5;

/** Bytes that are not a message of the expected type: the call fails as grpc-go's does, INTERNAL. */
export class MalformedMessageError extends GrpcError {
  constructor(problem: string) {
    super(Status.INTERNAL, `grpc: error unmarshalling request: ${problem}`);
    this.name = 'MalformedMessageError';
  }
}

/** envoy.type.v3.RateLimitUnit (and RateLimitResponse.RateLimit.Unit) by number. */
const UNITS = ['UNKNOWN', 'SECOND', 'MINUTE', 'HOUR', 'DAY', 'MONTH', 'YEAR', 'WEEK'] as const;
const UNIT_NUMBERS: ReadonlyMap<string, number> = new Map(UNITS.map((name, number) => [name, number]));
const CODE_NUMBERS: Readonly<Record<DescriptorStatus['code'], number>> = { OK: 1, OVER_LIMIT: 2 };

/** Reads one message's fields from `bytes[at, end)`: a cursor over the wire format. */
class Reader {
  constructor(
    private readonly bytes: Buffer,
    public at: number,
    /** Where the message being read ends: the whole one's, or an embedded one's (see enter). */
    private end: number,
  ) {}

  /** A varint's low 32 bits, unsigned (as a uint32 field reads a larger value). */
  uint32(): number {
    const low = this.varint();
    this.skipHigh();
    return low;
  }

  /** A varint as a number: exact up to 2^53, larger ones approximate (and never safe integers). */
  uint64(): number {
    const low = this.varint();
    return low + this.skipHigh() * 0x1_0000_0000;
  }

  /** The first 32 bits of a varint (its first five bytes at most). */
  private varint(): number {
    let value = 0;
    for (let shift = 0; shift < 28; shift += 7) {
      const byte = this.byte();
      value |= (byte & 0x7f) << shift;
      if (byte < 0x80) {
        this.more = false;
        return value >>> 0;
      }
    }
    const byte = this.byte();
    value = (value | ((byte & 0x0f) << 28)) >>> 0;
    this.high = (byte & 0x7f) >> 4;
    this.more = byte >= 0x80;
    return value;
  }

  // What varint() left of a longer varint: its bits above 32 so far, and whether more bytes follow.
  private high = 0;
  private more = false;

  /** Reads the rest of a varint begun by varint(); answers its bits above the low 32. */
  private skipHigh(): number {
    if (!this.more) return 0;
    let high = this.high;
    for (let shift = 3; ; shift += 7) {
      // Bytes 6 to 10 hold bits 35 to 63: an 11th is too many.
      if (shift > 31) throw new MalformedMessageError('a varint longer than 10 bytes');
      const byte = this.byte();
      high += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return high;
    }
  }

  private byte(): number {
    if (this.at >= this.end) throw new MalformedMessageError('a message ends inside a field');
    return this.bytes[this.at++] as number;
  }

  /** Reads a length-delimited field's length: answers where it ends, the reader at its start. */
  private delimited(): number {
    const length = this.uint32();
    if (length > this.end - this.at) throw new MalformedMessageError('a field runs past the end of its message');
    return this.at + length;
  }

  string(): string {
    const end = this.delimited();
    const text = this.bytes.toString('utf8', this.at, end);
    this.at = end;
    return text;
  }

  /** Reads the embedded message that comes next, until leave(): answers the end to go back to. */
  enter(): number {
    const outer = this.end;
    this.end = this.delimited();
    return outer;
  }

  /** Back to the enclosing message, once the embedded one is read. */
  leave(outer: number): void {
    this.end = outer;
  }

  /** The next field's number and wire type, or undefined at the end of the message. */
  tag(): number | undefined {
    if (this.at >= this.end) return undefined;
    const tag = this.uint32();
    if (tag >>> 3 === 0) throw new MalformedMessageError('a field numbered 0');
    return tag;
  }

  /** Skips a field of wire type `type` (unknown, or of a wire type its number does not have). */
  skip(tag: number): void {
    switch (tag & 7) {
      case VARINT:
        this.uint64();
        return;
      case FIXED64:
        this.advance(8);
        return;
      case LENGTH:
        this.at = this.delimited();
        return;
      case FIXED32:
        this.advance(4);
        return;
      case START_GROUP:
        for (let inner = this.tag(); inner !== ((tag & ~7) | END_GROUP); inner = this.tag()) {
          if (inner === undefined) throw new MalformedMessageError('a group without its end');
          this.skip(inner);
        }
        return;
      default:
        throw new MalformedMessageError(`wire type ${tag & 7}`);
    }
  }

  private advance(count: number): void {
    if (count > this.end - this.at) throw new MalformedMessageError('a message ends inside a field');
    this.at += count;
  }
}

/** Field number and wire type as a tag. */
const tag = (field: number, type: number) => (field << 3) | type;

function readEntry(reader: Reader): Entry {
  const outer = reader.enter();
  let key = '';
  let value = '';
  for (let t = reader.tag(); t !== undefined; t = reader.tag()) {
    if (t === tag(1, LENGTH)) key = reader.string();
    else if (t === tag(2, LENGTH)) value = reader.string();
    else reader.skip(t);
  }
  reader.leave(outer);
  return { key, value };
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** Merges an override into `limit`: a message field given twice is merged, as protobuf does. */
function readLimit(reader: Reader, limit: Mutable<NonNullable<RequestDescriptor['limit']>>): void {
  const outer = reader.enter();
  for (let t = reader.tag(); t !== undefined; t = reader.tag()) {
    if (t === tag(1, VARINT)) limit.requestsPerUnit = reader.uint32();
    else if (t === tag(2, VARINT)) {
      const number = reader.uint32();
      // An enum number this build does not know is kept as a number, as proto3 keeps it.
      limit.unit = (UNITS[number] ?? String(number)) as UnitName;
    } else reader.skip(t);
  }
  reader.leave(outer);
}

/** google.protobuf.UInt64Value: its value, field 1 (0 when left out). */
function readUInt64Value(reader: Reader, value: number): number {
  const outer = reader.enter();
  for (let t = reader.tag(); t !== undefined; t = reader.tag()) {
    if (t === tag(1, VARINT)) value = reader.uint64();
    else reader.skip(t);
  }
  reader.leave(outer);
  return value;
}

function readDescriptor(reader: Reader): RequestDescriptor {
  const outer = reader.enter();
  const entries: Entry[] = [];
  const descriptor: Mutable<RequestDescriptor> = { entries };
  for (let t = reader.tag(); t !== undefined; t = reader.tag()) {
    if (t === tag(1, LENGTH)) entries.push(readEntry(reader));
    else if (t === tag(2, LENGTH)) readLimit(reader, (descriptor.limit ??= { requestsPerUnit: 0, unit: 'UNKNOWN' }));
    // Present (even when 0) once given.
    else if (t === tag(3, LENGTH)) descriptor.hitsAddend = readUInt64Value(reader, descriptor.hitsAddend ?? 0);
    else reader.skip(t);
  }
  reader.leave(outer);
  return descriptor;
}

/** Reads an envoy.service.ratelimit.v3.RateLimitRequest; throws MalformedMessageError. */
export function decodeRateLimitRequest(bytes: Buffer): RateLimitRequest {
  const reader = new Reader(bytes, 0, bytes.length);
  let domain = '';
  const descriptors: RequestDescriptor[] = [];
  let hitsAddend = 0;
  for (let t = reader.tag(); t !== undefined; t = reader.tag()) {
    if (t === tag(1, LENGTH)) domain = reader.string();
    else if (t === tag(2, LENGTH)) descriptors.push(readDescriptor(reader));
    else if (t === tag(3, VARINT)) hitsAddend = reader.uint32();
    else reader.skip(t);
  }
  return { domain, descriptors, hitsAddend };
}

/** Reads a grpc.health.v1.HealthCheckRequest: the service asked about. */
export function decodeHealthCheckRequest(bytes: Buffer): string {
  const reader = new Reader(bytes, 0, bytes.length);
  let service = '';
  for (let t = reader.tag(); t !== undefined; t = reader.tag()) {
    if (t === tag(1, LENGTH)) service = reader.string();
    else reader.skip(t);
  }
  return service;
}

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
      scalarSize(1, limit.requestsPerUnit) + scalarSize(2, UNIT_NUMBERS.get(limit.unit) ?? 0) + name,
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
    w.scalar(2, UNIT_NUMBERS.get(limit.unit) ?? 0);
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
