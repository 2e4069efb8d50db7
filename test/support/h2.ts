import { connect, type Socket } from 'node:net';

// HTTP/2 (RFC 9113) by hand over node:net, as much as a client of gRPC calls needs: frames written
// byte by byte, as Envoy's would be, and the server's header blocks read with HPACK (RFC 7541). The
// bench's load client (bench/serve-load.ts) writes its requests with the same helpers.

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
export const FRAME = {
  DATA: 0x0,
  HEADERS: 0x1,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const;
export const END_STREAM = 0x1;
export const ACK = 0x1;
export const END_HEADERS = 0x4;
export const PADDED = 0x8;
const PRIORITY = 0x20;

export function frameHeader(length: number, type: number, flags: number, stream: number): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(length, 0, 3);
  header[3] = type;
  header[4] = flags;
  header.writeUInt32BE(stream, 5);
  return header;
}

export function frame(type: number, flags: number, stream: number, payload: Buffer): Buffer {
  return Buffer.concat([frameHeader(payload.length, type, flags, stream), payload]);
}

/** An HPACK integer of an `n`-bit prefix, its first byte's other bits `high`. */
function hpackInteger(value: number, n: number, high: number): Buffer {
  const most = (1 << n) - 1;
  if (value < most) return Buffer.from([high | value]);
  const bytes = [high | most];
  for (value -= most; value >= 128; value = Math.floor(value / 128)) bytes.push((value % 128) | 0x80);
  bytes.push(value);
  return Buffer.from(bytes);
}

/** An HPACK string literal, not Huffman-coded. */
export function hpackString(text: string): Buffer {
  const bytes = Buffer.from(text);
  return Buffer.concat([hpackInteger(bytes.length, 7, 0), bytes]);
}

/**
 * A header block of literals without indexing, not Huffman-coded: the same bytes for every call, so
 * the server's dynamic table never changes and the block can be sent again as it is.
 */
export function headerBlock(fields: readonly (readonly [string, string])[]): Buffer {
  return Buffer.concat(fields.flatMap(([name, value]) => [Buffer.from([0x00]), hpackString(name), hpackString(value)]));
}

/** A gRPC message: its flag (1: compressed), its length, its bytes. */
export function grpcMessage(protobuf: Buffer, flag = 0): Buffer {
  const header = Buffer.alloc(5);
  header[0] = flag;
  header.writeUInt32BE(protobuf.length, 1);
  return Buffer.concat([header, protobuf]);
}

// RFC 7541 Appendix A.
const STATIC_TABLE: readonly (readonly [string, string])[] = [
  [':authority', ''],
  [':method', 'GET'],
  [':method', 'POST'],
  [':path', '/'],
  [':path', '/index.html'],
  [':scheme', 'http'],
  [':scheme', 'https'],
  [':status', '200'],
  [':status', '204'],
  [':status', '206'],
  [':status', '304'],
  [':status', '400'],
  [':status', '404'],
  [':status', '500'],
  ...[
    'accept-charset',
    'accept-encoding',
    'accept-language',
    'accept-ranges',
    'accept',
    'access-control-allow-origin',
    'age',
    'allow',
    'authorization',
    'cache-control',
    'content-disposition',
    'content-encoding',
    'content-language',
    'content-length',
    'content-location',
    'content-range',
    'content-type',
    'cookie',
    'date',
    'etag',
    'expect',
    'expires',
    'from',
    'host',
    'if-match',
    'if-modified-since',
    'if-none-match',
    'if-range',
    'if-unmodified-since',
    'last-modified',
    'link',
    'location',
    'max-forwards',
    'proxy-authenticate',
    'proxy-authorization',
    'range',
    'referer',
    'refresh',
    'retry-after',
    'server',
    'set-cookie',
    'strict-transport-security',
    'transfer-encoding',
    'user-agent',
    'vary',
    'via',
    'www-authenticate',
  ].map((name): [string, string] => [name, name === 'accept-encoding' ? 'gzip, deflate' : '']),
];

// RFC 7541 Appendix B is a canonical Huffman code: each symbol's code follows from the code lengths
// alone, taken in order of length, then symbol. These are its lengths for the bytes 0 to 255; EOS
// (256) is 30 bits.
const HUFFMAN_LENGTHS = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28,
  28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6,
  5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23,
  22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22, 21, 20, 22, 22,
  23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, 26, 26,
  20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27,
  27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27,
  27, 27, 27, 26, 30,
];

/** Each code, as `${length}:${code}`, to its symbol. */
const HUFFMAN_CODES: ReadonlyMap<string, number> = (() => {
  const order = HUFFMAN_LENGTHS.map((length, symbol) => ({ length, symbol })).sort(
    (a, b) => a.length - b.length || a.symbol - b.symbol,
  );
  const codes = new Map<string, number>();
  let code = 0n;
  let length = order[0]?.length ?? 0;
  for (const entry of order) {
    code <<= BigInt(entry.length - length);
    length = entry.length;
    codes.set(`${length}:${code}`, entry.symbol);
    code++;
  }
  return codes;
})();

function huffmanDecode(bytes: Buffer): string {
  const out: number[] = [];
  let code = 0n;
  let length = 0;
  for (const byte of bytes) {
    for (let bit = 7; bit >= 0; bit--) {
      code = (code << 1n) | BigInt((byte >> bit) & 1);
      length++;
      const symbol = HUFFMAN_CODES.get(`${length}:${code}`);
      if (symbol === undefined) continue;
      if (symbol === 256) throw new Error('HPACK: EOS inside a string');
      out.push(symbol);
      code = 0n;
      length = 0;
    }
  }
  // What is left is padding: the most significant bits of EOS, all ones, under 8 of them.
  if (length >= 8 || code !== (1n << BigInt(length)) - 1n) throw new Error('HPACK: bad Huffman padding');
  return Buffer.from(out).toString('latin1');
}

/** HPACK's decoding side: one per connection, as its dynamic table is. */
export class HpackDecoder {
  private readonly dynamic: [string, string][] = [];
  private size = 0;
  private maxSize = 4096;
  private at = 0;
  private block: Buffer = Buffer.alloc(0);

  private integer(n: number): number {
    const most = (1 << n) - 1;
    let value = (this.block[this.at++] as number) & most;
    if (value < most) return value;
    for (let shift = 0; ; shift += 7) {
      const byte = this.block[this.at++] as number;
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
  }

  private string(): string {
    const huffman = ((this.block[this.at] as number) & 0x80) !== 0;
    const length = this.integer(7);
    const bytes = this.block.subarray(this.at, (this.at += length));
    return huffman ? huffmanDecode(bytes) : bytes.toString('latin1');
  }

  private entry(index: number): readonly [string, string] {
    const entry =
      index <= STATIC_TABLE.length ? STATIC_TABLE[index - 1] : this.dynamic[index - STATIC_TABLE.length - 1];
    if (entry === undefined) throw new Error(`HPACK: no entry ${index}`);
    return entry;
  }

  private add(field: [string, string]): void {
    this.dynamic.unshift(field);
    this.size += 32 + field[0].length + field[1].length;
    this.evict();
  }

  private evict(): void {
    while (this.size > this.maxSize) {
      const [name, value] = this.dynamic.pop() as [string, string];
      this.size -= 32 + name.length + value.length;
    }
  }

  decode(block: Buffer): [string, string][] {
    this.block = block;
    this.at = 0;
    const fields: [string, string][] = [];
    while (this.at < block.length) {
      const first = block[this.at] as number;
      if (first & 0x80) {
        fields.push([...this.entry(this.integer(7))]);
      } else if ((first & 0xe0) === 0x20) {
        this.maxSize = this.integer(5);
        this.evict();
      } else {
        const indexing = (first & 0xc0) === 0x40;
        const index = this.integer(indexing ? 6 : 4);
        const name = index === 0 ? this.string() : this.entry(index)[0];
        const field: [string, string] = [name, this.string()];
        if (indexing) this.add(field);
        fields.push(field);
      }
    }
    return fields;
  }
}

/** What the server sent on one stream: its header blocks, decoded, its data, and a reset's code if any. */
export interface RawAnswer {
  readonly stream: number;
  readonly blocks: [string, string][][];
  readonly data: Buffer;
  readonly reset?: number;
  /** Whether the server's side ended (END_STREAM, or a reset). */
  readonly ended: boolean;
}

/**
 * One HTTP/2 connection by hand: `call` opens a stream with a header block of `fields` and sends
 * `body` as DATA frames, the last with END_STREAM (none, and HEADERS carries it; `open`: none does),
 * and resolves once the server ends its side of the stream.
 */
export async function rawConnection(port: number): Promise<{
  call(fields: readonly (readonly [string, string])[], body: readonly Buffer[], open?: boolean): Promise<RawAnswer>;
  /** The code of each RST_STREAM received so far, by stream, those after a stream's end included. */
  readonly resets: ReadonlyMap<number, number>;
  close(): void;
}> {
  const socket: Socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  socket.write(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0, Buffer.alloc(0))]));
  const decoder = new HpackDecoder();
  const streams = new Map<
    number,
    { blocks: [string, string][][]; data: Buffer[]; reset?: number; pending: Buffer[]; done(): void }
  >();
  const resets = new Map<number, number>();
  let next = 1;
  let received = Buffer.alloc(0);
  const receive = (type: number, flags: number, id: number, payload: Buffer) => {
    const stream = streams.get(id);
    if (type === FRAME.RST_STREAM) resets.set(id, payload.readUInt32BE(0));
    if (type === FRAME.SETTINGS && !(flags & ACK)) socket.write(frame(FRAME.SETTINGS, ACK, 0, Buffer.alloc(0)));
    else if (type === FRAME.PING && !(flags & ACK)) socket.write(frame(FRAME.PING, ACK, 0, payload));
    if (stream === undefined) return;
    if (type === FRAME.HEADERS || type === FRAME.CONTINUATION) {
      let block = payload;
      if (type === FRAME.HEADERS && flags & PADDED) block = block.subarray(1, block.length - (payload[0] as number));
      if (type === FRAME.HEADERS && flags & PRIORITY) block = block.subarray(5);
      stream.pending.push(block);
      if (flags & END_HEADERS) stream.blocks.push(decoder.decode(Buffer.concat(stream.pending.splice(0))));
    } else if (type === FRAME.DATA) {
      stream.data.push(flags & PADDED ? payload.subarray(1, payload.length - (payload[0] as number)) : payload);
      // The connection's window and the stream's are given back at once.
      const increment = Buffer.alloc(4);
      increment.writeUInt32BE(payload.length);
      if (payload.length > 0)
        socket.write(
          Buffer.concat([frame(FRAME.WINDOW_UPDATE, 0, 0, increment), frame(FRAME.WINDOW_UPDATE, 0, id, increment)]),
        );
    } else if (type === FRAME.RST_STREAM) {
      stream.reset = payload.readUInt32BE(0);
      stream.done();
      return;
    }
    if ((type === FRAME.HEADERS || type === FRAME.DATA) && flags & END_STREAM) stream.done();
  };
  socket.on('data', (chunk: Buffer) => {
    received = Buffer.concat([received, chunk]);
    while (received.length >= 9 && received.length >= 9 + received.readUIntBE(0, 3)) {
      const length = received.readUIntBE(0, 3);
      receive(
        received[3] as number,
        received[4] as number,
        received.readUInt32BE(5) & 0x7fff_ffff,
        received.subarray(9, 9 + length),
      );
      received = received.subarray(9 + length);
    }
  });
  return {
    call: (fields, body, open = false) =>
      new Promise((resolve) => {
        const id = next;
        next += 2;
        const answer = { blocks: [] as [string, string][][], data: [] as Buffer[], pending: [] as Buffer[] };
        let ended = false;
        const done = () => {
          if (ended) return;
          ended = true;
          const reset = (answer as { reset?: number }).reset;
          resolve({
            stream: id,
            blocks: answer.blocks,
            data: Buffer.concat(answer.data),
            ended,
            ...(reset === undefined ? {} : { reset }),
          });
        };
        streams.set(id, Object.assign(answer, { done }));
        const block = headerBlock(fields);
        const frames = [frame(FRAME.HEADERS, END_HEADERS | (body.length === 0 && !open ? END_STREAM : 0), id, block)];
        body.forEach((payload, i) =>
          frames.push(frame(FRAME.DATA, i === body.length - 1 && !open ? END_STREAM : 0, id, payload)),
        );
        socket.write(Buffer.concat(frames));
      }),
    resets,
    close: () => socket.destroy(),
  };
}
