/**
 * SHA-1 and SHA-256 of a string's UTF-8 bytes, computed synchronously. Web Crypto's digest is a Promise,
 * but a script's SHA (which Redis knows it by: the SHA-1 of its exact text) and a long key's hashed
 * Redis key are needed synchronously, so sluice runs these two small FIPS 180-4 functions itself
 * and needs no `node:crypto`. Tested against `node:crypto` in test/core/digest.test.ts.
 */

const utf8 = new TextEncoder();

// Words are signed (Int32Array), as engines hold them unboxed; `>>> 0` makes them unsigned for hex.

/** The message's 32-bit big-endian words, padded to whole 64-byte blocks with its bit length last. */
function paddedWords(text: string): Int32Array {
  const bytes = utf8.encode(text);
  const words = new Int32Array(Math.ceil((bytes.length + 9) / 64) * 16);
  for (let i = 0; i < bytes.length; i++) words[i >> 2]! |= bytes[i]! << (24 - (i & 3) * 8);
  words[bytes.length >> 2]! |= 0x80 << (24 - (bytes.length & 3) * 8);
  words[words.length - 2] = Math.floor(bytes.length / 2 ** 29);
  words[words.length - 1] = bytes.length << 3;
  return words;
}

const hex = (state: Int32Array): string =>
  Array.from(state, (word) => (word >>> 0).toString(16).padStart(8, '0')).join('');

const rotl = (x: number, n: number): number => (x << n) | (x >>> (32 - n));
const rotr = (x: number, n: number): number => (x >>> n) | (x << (32 - n));

// SHA-1's round constants, one for each 20 rounds.
const SHA1_ROUND_CONSTANTS = [0x5a827999, 0x6ed9eba1, 0x8f1bbcdc, 0xca62c1d6];

/** The SHA-1 of `text`, in lowercase hex, as Redis names a script (SCRIPT LOAD, EVALSHA). */
export function sha1Hex(text: string): string {
  const words = paddedWords(text);
  const state = new Int32Array([0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0]);
  const w = new Int32Array(80);
  for (let block = 0; block < words.length; block += 16) {
    for (let t = 0; t < 16; t++) w[t] = words[block + t]!;
    for (let t = 16; t < 80; t++) w[t] = rotl(w[t - 3]! ^ w[t - 8]! ^ w[t - 14]! ^ w[t - 16]!, 1);
    let a = state[0]!,
      b = state[1]!,
      c = state[2]!,
      d = state[3]!,
      e = state[4]!;
    for (let t = 0; t < 80; t++) {
      const round = (t / 20) | 0;
      const f = round === 0 ? (b & c) | (~b & d) : round === 2 ? (b & c) | (b & d) | (c & d) : b ^ c ^ d;
      const next = (rotl(a, 5) + f + e + SHA1_ROUND_CONSTANTS[round]! + w[t]!) | 0;
      e = d;
      d = c;
      c = rotl(b, 30);
      b = a;
      a = next;
    }
    state[0]! += a;
    state[1]! += b;
    state[2]! += c;
    state[3]! += d;
    state[4]! += e;
  }
  return hex(state);
}

// The first 32 bits of the fractional parts of the cube roots of the first 64 primes.
const K256 = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
]);

// The message schedule, reused: a call runs to its end before another can begin.
const SCHEDULE = new Int32Array(64);
const SHA256_INITIAL = new Int32Array([
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
]);

/** The SHA-256 of `text`'s UTF-8 bytes: eight 32-bit words, big-endian. */
function sha256Words(text: string): Int32Array {
  const words = paddedWords(text);
  const state = SHA256_INITIAL.slice();
  const w = SCHEDULE;
  for (let block = 0; block < words.length; block += 16) {
    for (let t = 0; t < 16; t++) w[t] = words[block + t]!;
    for (let t = 16; t < 64; t++) {
      const w15 = w[t - 15]!;
      const w2 = w[t - 2]!;
      const s0 = rotr(w15, 7) ^ rotr(w15, 18) ^ (w15 >>> 3);
      const s1 = rotr(w2, 17) ^ rotr(w2, 19) ^ (w2 >>> 10);
      w[t] = (w[t - 16]! + s0 + w[t - 7]! + s1) | 0;
    }
    let a = state[0]!,
      b = state[1]!,
      c = state[2]!,
      d = state[3]!,
      e = state[4]!,
      f = state[5]!,
      g = state[6]!,
      h = state[7]!;
    for (let t = 0; t < 64; t++) {
      const t1 = (h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K256[t]! + w[t]!) | 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      h = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    state[0]! += a;
    state[1]! += b;
    state[2]! += c;
    state[3]! += d;
    state[4]! += e;
    state[5]! += f;
    state[6]! += g;
    state[7]! += h;
  }
  return state;
}

/** The SHA-256 of `text`, in lowercase hex. */
export function sha256Hex(text: string): string {
  return hex(sha256Words(text));
}

/** The SHA-256 of `text`, as 32 bytes. */
export function sha256Bytes(text: string): Uint8Array {
  const state = sha256Words(text);
  const bytes = new Uint8Array(32);
  const view = new DataView(bytes.buffer);
  state.forEach((word, i) => view.setInt32(i * 4, word));
  return bytes;
}
