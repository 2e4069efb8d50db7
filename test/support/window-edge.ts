import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Windows start at whole multiples of their length since the epoch, so a scenario that counts in an
 * hour-long window across several seconds fails when it spans the hour: its key expires, its count
 * starts again. When the current window of `windowMs` ends within `spanMs`, this waits until it has
 * ended (Redis runs on this machine's clock), so the scenario fits in the next one.
 */
export async function awayFromWindowEnd(windowMs: number, spanMs: number): Promise<void> {
  const left = windowMs - (Date.now() % windowMs);
  if (left < spanMs) await sleep(left + 1_000);
}
