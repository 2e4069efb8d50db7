import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { settle, type Request } from '../../src/engine/batch.js';
import { unpackArray } from '../../src/engine/msgpack.js';

const bytes = (...values: number[]) => Buffer.from(values);

describe('MessagePack batch replies', () => {
  it('reads every integer, float and string type an array of them can hold', () => {
    const message = 'é'.repeat(40); // 80 bytes: a str8
    const packed = Buffer.concat([
      bytes(0xdc, 0x00, 0x12), // array16 of 18
      bytes(0x00, 0x7f, 0xff, 0xe0), // fixints: 0, 127, -1, -32
      bytes(0xcc, 0xff, 0xcd, 0x01, 0x00, 0xce, 0x00, 0x01, 0x00, 0x00), // uint8 255, uint16 256, uint32 65536
      bytes(0xcf, 0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00), // uint64 1,700,000,000,000
      bytes(0xd0, 0x80, 0xd1, 0xff, 0x00, 0xd2, 0xff, 0xff, 0x00, 0x00), // int8 -128, int16 -256, int32 -65536
      bytes(0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe), // int64 -2
      bytes(0xca, 0x3f, 0xc0, 0x00, 0x00, 0xcb, 0x3f, 0xf8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00), // float32 1.5, float64 1.5
      bytes(0xa2, 0x6f, 0x6b), // fixstr 'ok'
      bytes(0xd9, 80),
      Buffer.from(message),
      bytes(0xda, 0x00, 0x01, 0x78, 0xdb, 0x00, 0x00, 0x00, 0x00), // str16 'x', str32 ''
    ]);
    assert.deepEqual(unpackArray(packed), [
      0,
      127,
      -1,
      -32,
      255,
      256,
      65536,
      1_700_000_000_000,
      -128,
      -256,
      -65536,
      -2,
      1.5,
      1.5,
      'ok',
      message,
      'x',
      '',
    ]);
  });

  it('reads fixarray and array32 headers', () => {
    assert.deepEqual(unpackArray(bytes(0x90)), []);
    assert.deepEqual(unpackArray(bytes(0x92, 0x01, 0x02)), [1, 2]);
    assert.deepEqual(unpackArray(bytes(0xdd, 0x00, 0x00, 0x00, 0x01, 0x05)), [5]);
  });

  it('refuses what is not an array of numbers and strings, or ends early, with an error saying so', () => {
    assert.throws(() => unpackArray(bytes()), /ends early/);
    assert.throws(() => unpackArray(bytes(0x81, 0x01, 0x02)), /not an array \(first byte 0x81\)/);
    assert.throws(() => unpackArray(bytes(0x92, 0x01)), /ends early/);
    assert.throws(() => unpackArray(bytes(0x91, 0xce, 0x00, 0x01)), /ends early/);
    assert.throws(() => unpackArray(bytes(0x91, 0xa5, 0x61)), /ends early/);
    assert.throws(() => unpackArray(bytes(0x91, 0xc0)), /unexpected type \(byte 0xc0 at 1\)/);
    // A header claiming more values than there are bytes is refused before anything is allocated.
    assert.throws(() => unpackArray(bytes(0xdd, 0xff, 0xff, 0xff, 0xff, 0x01)), /ends early/);
  });

  it('settles a packed reply as it would the same reply as a RESP array, and fails every request on an unreadable one', () => {
    const outcomes = (raw: unknown) => {
      const requests = [0, 1].map(() => {
        const r: Request & { outcome?: unknown } = {
          keys: [],
          args: [],
          settle: (reply) => (r.outcome = reply),
          fail: (error) => (r.outcome = error instanceof Error ? error.message : error),
        };
        return r;
      });
      settle(requests, raw, (message) => new Error(message));
      return requests.map((r) => r.outcome);
    };
    // The batch's time (50), then each request's part: a reply of two numbers, an error.
    const plain = [50, 2, 1, 300, -1, 'WRONGTYPE x'];
    assert.deepEqual(
      outcomes(bytes(0x96, 0x32, 0x02, 0x01, 0xcd, 0x01, 0x2c, 0xff, 0xab, ...Buffer.from('WRONGTYPE x'))),
      outcomes(plain),
    );
    assert.deepEqual(outcomes(plain), [[50, 1, 300], 'WRONGTYPE x']);
    const unreadable = outcomes(bytes(0x92, 0x01));
    assert.equal(unreadable.length, 2);
    for (const outcome of unreadable)
      assert.match(String(outcome), /the batch script's reply could not be read: MessagePack reply ends early/);
  });
});
