// Redis Cluster's key-to-slot mapping (the cluster specification): CRC16 (XMODEM) of the key, or of
// the text inside its first non-empty {...}, modulo 16,384.
const SLOTS = 16_384;

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

const encoder = new TextEncoder();

/** The cluster slot a key hashes to. */
export function hashSlot(key: string): number {
  const open = key.indexOf('{');
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) return crc16(encoder.encode(key.slice(open + 1, close))) % SLOTS;
  }
  return crc16(encoder.encode(key)) % SLOTS;
}
