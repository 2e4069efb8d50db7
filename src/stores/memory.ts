import { InvalidOptionError } from '../core/errors.js';
import type { Arg, Reply, Script } from '../core/types.js';
import { optionsObject, positiveInteger } from '../core/validate.js';
import type { Store } from './store.js';

export interface MemoryStoreOptions {
  /** The most keys held; past it the least recently used key is evicted. Default 100,000. */
  maxKeys?: number;
  /** The clock, in ms since the epoch. Default Date.now; tests may pass a fake one. */
  now?: () => number;
}

interface Slot {
  value: unknown;
  expiresAt: number;
}

// Each call also checks this many entries for expiry, continuing where the last call stopped:
// expired keys are reclaimed without a timer per key and without a timer keeping the process alive.
const SWEEP_PER_CALL = 2;

export interface MemoryStore extends Store {
  /** How many keys are held now, expired ones not yet swept included. */
  readonly size: number;
}

/** State in this process, decided by the algorithms' TypeScript twins: the same semantics as Redis. */
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  const o = optionsObject('memoryStore', options);
  const maxKeys = o.maxKeys === undefined ? 100_000 : positiveInteger('maxKeys', o.maxKeys);
  if (o.now !== undefined && typeof o.now !== 'function') throw new InvalidOptionError('now', o.now, 'a function returning ms');
  const now = (o.now as (() => number) | undefined) ?? Date.now;
  // A Map iterates in insertion order; re-inserting on every use keeps it in least-recently-used order.
  const slots = new Map<string, Slot>();
  let sweep = slots.entries();
  // Eviction keeps its place too: a fresh keys() would step again over every entry deleted at the
  // front and not yet compacted away, making each insert past maxKeys cost O(maxKeys) under a flood
  // of new keys. Everything before this cursor is gone, so its next key is the least recently used.
  let eviction = slots.keys();

  function sweepSome(time: number): void {
    for (let i = 0; i < SWEEP_PER_CALL; i++) {
      const next = sweep.next();
      if (next.done) {
        sweep = slots.entries();
        return;
      }
      const [key, slot] = next.value;
      if (slot.expiresAt <= time) slots.delete(key);
    }
  }

  function read(key: string, time: number) {
    const slot = slots.get(key);
    if (!slot) return undefined;
    if (slot.expiresAt <= time) {
      slots.delete(key);
      return undefined;
    }
    slots.delete(key);
    slots.set(key, slot);
    return { value: slot.value, ttlMs: slot.expiresAt - time };
  }

  function write(key: string, value: unknown, ttlMs: number, time: number): void {
    slots.delete(key);
    slots.set(key, { value, expiresAt: time + ttlMs });
    if (slots.size > maxKeys) {
      let oldest = eviction.next();
      if (oldest.done) {
        eviction = slots.keys();
        oldest = eviction.next();
      }
      if (!oldest.done) slots.delete(oldest.value);
    }
  }

  return {
    get size() {
      return slots.size;
    },
    run(script: Script, keys: readonly string[], args: readonly Arg[]): Promise<Reply> {
      const time = now();
      sweepSome(time);
      const { reply, writes } = script.twin(
        time,
        keys.map((key) => read(key, time)),
        args,
      );
      writes.forEach((w, i) => {
        const key = keys[i];
        if (w === undefined || key === undefined) return;
        if (w === null) slots.delete(key);
        else write(key, w.value, w.ttlMs, time);
      });
      return Promise.resolve(reply);
    },
    delete(keys: readonly string[]): Promise<void> {
      for (const key of keys) slots.delete(key);
      return Promise.resolve();
    },
  };
}
