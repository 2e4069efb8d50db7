import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Windows start at whole multiples of their length since the epoch, so a scenario that counts in
 * one window across some time fails when it spans the window's end: the key expires, the count
 * starts again. When the current window of `windowMs` ends within `spanMs`, this waits until it has
 * ended (Redis runs on this machine's clock; 20 ms more for a timer that fires early), so the
 * scenario fits in the next one.
 */
export async function awayFromWindowEnd(windowMs: number, spanMs: number): Promise<void> {
  if (spanMs >= windowMs - 20) throw new RangeError(`a span of ${spanMs} ms never fits in a ${windowMs} ms window`);
  const left = windowMs - (Date.now() % windowMs);
  if (left < spanMs) await sleep(left + 20);
}
