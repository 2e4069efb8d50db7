/**
 * Reads what Redis's `cmsgpack.pack` makes of a batch script's reply: one MessagePack array of
 * numbers and strings (the batch's lengths, replies and error messages). Only the types that array
 * can hold are read; anything else is an error, as is an array that ends early. Why a batch replies
 * packed: bench/NOTES.md (the Redis store's batch).
 */
type Reader = (bytes: Buffer, at: number) => number;

// The number types, by their first byte: how many bytes follow, and how to read them (indexed by
// that byte, as a reply holds thousands of them).
const NUMBER_TYPES: readonly (readonly [type: number, size: number, read: Reader])[] = [
  [0xcc, 1, (b, at) => b.readUInt8(at)],
  [0xcd, 2, (b, at) => b.readUInt16BE(at)],
  [0xce, 4, (b, at) => b.readUInt32BE(at)],
  // 64-bit integers in two halves: exact below 2^53, as any number is, and without a BigInt.
  [0xcf, 8, (b, at) => b.readUInt32BE(at) * 2 ** 32 + b.readUInt32BE(at + 4)],
  [0xd0, 1, (b, at) => b.readInt8(at)],
  [0xd1, 2, (b, at) => b.readInt16BE(at)],
  [0xd2, 4, (b, at) => b.readInt32BE(at)],
  [0xd3, 8, (b, at) => b.readInt32BE(at) * 2 ** 32 + b.readUInt32BE(at + 4)],
  [0xca, 4, (b, at) => b.readFloatBE(at)],
  [0xcb, 8, (b, at) => b.readDoubleBE(at)],
];
const NUMBERS: (readonly [size: number, read: Reader] | undefined)[] = [];
for (const [type, size, read] of NUMBER_TYPES) NUMBERS[type] = [size, read];

// Strings (str8, str16, str32) and arrays (array16, array32) whose length takes this many bytes.
const STRING_LENGTH = new Map([
  [0xd9, 1],
  [0xda, 2],
  [0xdb, 4],
]);
const ARRAY_LENGTH = new Map([
  [0xdc, 2],
  [0xdd, 4],
]);

export function unpackArray(bytes: Buffer): (number | string)[] {
  let at = 0;
  const early = () => new Error(`MessagePack reply ends early (${bytes.length} bytes)`);
  const need = (count: number) => {
    if (at + count > bytes.length) throw early();
  };
  const take = (size: number, read: Reader) => {
    need(size);
    at += size;
    return read(bytes, at - size);
  };
  const unsigned = (size: number) => {
    need(size);
    at += size;
    return bytes.readUIntBE(at - size, size);
  };
  const text = (size: number) => {
    need(size);
    at += size;
    return bytes.toString('utf8', at - size, at);
  };

  const sized = (type: number) => {
    const number = NUMBERS[type];
    if (number !== undefined) return take(number[0], number[1]);
    const lengthSize = STRING_LENGTH.get(type);
    if (lengthSize !== undefined) return text(unsigned(lengthSize));
    throw new Error(`MessagePack reply holds an unexpected type (byte 0x${type.toString(16)} at ${at - 1})`);
  };

  const header = unsigned(1);
  const lengthSize = ARRAY_LENGTH.get(header);
  let length: number;
  if (header >= 0x90 && header <= 0x9f) length = header - 0x90;
  else if (lengthSize !== undefined) length = unsigned(lengthSize);
  else throw new Error(`MessagePack reply is not an array (first byte 0x${header.toString(16)})`);
  // Every value takes at least a byte: a longer array cannot be in these bytes.
  need(length);
  const values = new Array<number | string>(length);
  for (let i = 0; i < length; i++) {
    // Most of a batch's numbers are small: one byte, read first.
    const type = bytes[at++];
    if (type === undefined) throw early();
    if (type < 0x80) values[i] = type;
    else if (type >= 0xe0) values[i] = type - 0x100;
    else if (type >= 0xa0 && type <= 0xbf) values[i] = text(type - 0xa0);
    else values[i] = sized(type);
  }
  return values;
}
