import { UNIT_NUMBERS, type UnitName } from './limits.js';
import { GrpcError, Status } from './grpc.js';
import type { Entry } from './match.js';
import type { RateLimitRequest, RequestDescriptor } from './messages.js';

// The protobuf wire format (protobuf.dev/programming-guides/encoding) of the messages sluice serve
// speaks, by hand: src/serve/proto/ratelimit.proto's field numbers, grpc.health.v1's and
// google.protobuf.Struct's. A request is read field by field from its bytes, here; answers are
// written in protobuf-writer.ts.

export const VARINT = 0;
export const FIXED64 = 1;
export const LENGTH = 2;
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

// Names (see Reader.name) decoded lately, by their length and first byte: decoding a string costs
// more than comparing a few bytes, and the service then looks up the same string each time.
const NAMES: string[] = new Array<string>(64).fill('');
const LONGEST_NAME = 64;

function isAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) >= 0x80) return false;
  return true;
}

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
    return this.textTo(this.delimited());
  }

  /**
   * A string that comes again and again (a domain, an entry's key): the same string as last time
   * when its bytes are, found without decoding them (see NAMES).
   */
  name(): string {
    const end = this.delimited();
    const { bytes, at } = this;
    const length = end - at;
    if (length === 0 || length > LONGEST_NAME) return this.textTo(end);
    const slot = ((bytes[at] as number) + length * 7) & (NAMES.length - 1);
    const known = NAMES[slot] as string;
    let i = 0;
    if (known.length === length) while (i < length && known.charCodeAt(i) === bytes[at + i]) i++;
    if (i === length) {
      this.at = end;
      return known;
    }
    const text = this.textTo(end);
    // Kept only if ASCII: one byte a character, so that comparing bytes to characters is exact.
    if (text.length === length && isAscii(text)) NAMES[slot] = text;
    return text;
  }

  /** The bytes from here to `end` as UTF-8 text. */
  private textTo(end: number): string {
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
export const tag = (field: number, type: number) => (field << 3) | type;

// The tags the readers below compare each field's with, computed once.
const LENGTH_1 = tag(1, LENGTH);
const LENGTH_2 = tag(2, LENGTH);
const LENGTH_3 = tag(3, LENGTH);
const VARINT_1 = tag(1, VARINT);
const VARINT_2 = tag(2, VARINT);
const VARINT_3 = tag(3, VARINT);

/**
 * `list` with `item` added, made with it when there is none yet: most lists here hold one item, and
 * an array made with it is its size, where push() would grow it.
 */
function appended<T>(list: T[] | undefined, item: T): T[] {
  if (list === undefined) return [item];
  list.push(item);
  return list;
}

function readEntry(reader: Reader): Entry {
  const outer = reader.enter();
  let key = '';
  let value = '';
  for (let t = reader.tag(); t !== undefined; t = reader.tag()) {
    if (t === LENGTH_1) key = reader.name();
    else if (t === LENGTH_2) value = reader.string();
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
    if (t === VARINT_1) limit.requestsPerUnit = reader.uint32();
    else if (t === VARINT_2) {
      const number = reader.uint32();
      // An enum number this build does not know is kept as a number, as proto3 keeps it.
      limit.unit = (UNIT_NUMBERS[number] ?? String(number)) as UnitName;
    } else reader.skip(t);
  }
  reader.leave(outer);
}

/** google.protobuf.UInt64Value: its value, field 1 (0 when left out). */
function readUInt64Value(reader: Reader, value: number): number {
  const outer = reader.enter();
  for (let t = reader.tag(); t !== undefined; t = reader.tag()) {
    if (t === VARINT_1) value = reader.uint64();
    else reader.skip(t);
  }
  reader.leave(outer);
  return value;
}

function readDescriptor(reader: Reader): RequestDescriptor {
  const outer = reader.enter();
  const descriptor: Mutable<RequestDescriptor> = { entries: [] };
  let entries: Entry[] | undefined;
  for (let t = reader.tag(); t !== undefined; t = reader.tag()) {
    if (t === LENGTH_1) descriptor.entries = entries = appended(entries, readEntry(reader));
    else if (t === LENGTH_2) readLimit(reader, (descriptor.limit ??= { requestsPerUnit: 0, unit: 'UNKNOWN' }));
    // Present (even when 0) once given.
    else if (t === LENGTH_3) descriptor.hitsAddend = readUInt64Value(reader, descriptor.hitsAddend ?? 0);
    else reader.skip(t);
  }
  reader.leave(outer);
  return descriptor;
}

/** Reads an envoy.service.ratelimit.v3.RateLimitRequest from `start` on; throws MalformedMessageError. */
export function decodeRateLimitRequest(bytes: Buffer, start = 0): RateLimitRequest {
  const reader = new Reader(bytes, start, bytes.length);
  let domain = '';
  let descriptors: RequestDescriptor[] | undefined;
  let hitsAddend = 0;
  for (let t = reader.tag(); t !== undefined; t = reader.tag()) {
    if (t === LENGTH_1) domain = reader.name();
    else if (t === LENGTH_2) descriptors = appended(descriptors, readDescriptor(reader));
    else if (t === VARINT_3) hitsAddend = reader.uint32();
    else reader.skip(t);
  }
  return { domain, descriptors: descriptors ?? [], hitsAddend };
}

/** Reads a grpc.health.v1.HealthCheckRequest from `start` on: the service asked about. */
export function decodeHealthCheckRequest(bytes: Buffer, start = 0): string {
  const reader = new Reader(bytes, start, bytes.length);
  let service = '';
  for (let t = reader.tag(); t !== undefined; t = reader.tag()) {
    if (t === LENGTH_1) service = reader.name();
    else reader.skip(t);
  }
  return service;
}
