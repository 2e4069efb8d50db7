import { InvalidOptionError } from '../core/errors.js';
import type { Arg, Reply, Script } from '../core/types.js';
import { optionsObject, positiveInteger } from '../core/validate.js';
import type { Store } from './store.js';

export interface MemoryStoreOptions {
  /** The most keys held; past it one not used lately is evicted (nearly least recently used). Default 100,000. */
  maxKeys?: number;
  /** The clock, in ms since the epoch. Default Date.now; tests may pass a fake one. */
  now?: () => number;
}

interface Slot {
  readonly key: string;
  value: unknown;
  expiresAt: number;
  /** Used since eviction last looked at it: it gets a second chance instead of being evicted. */
  used: boolean;
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
  // Keys in insertion order, each slot updated in place. Eviction is "second chance" (CLOCK):
  // from the oldest, a slot used since it was last looked at is moved to the end and spared, the
  // first one unused is evicted. Nearly LRU, without moving a key on every use (which costs a
  // delete and an insert, and makes the Map rehash as its holes pile up).
  const slots = new Map<string, Slot>();
  let sweep = slots.values();
  // Eviction keeps its place: a fresh iterator would step again over every entry deleted at the
  // front and not yet compacted away, making each insert past maxKeys cost O(maxKeys) under a
  // flood of new keys.
  let eviction = slots.values();

  function sweepSome(time: number): void {
    for (let i = 0; i < SWEEP_PER_CALL; i++) {
      const next = sweep.next();
      if (next.done) {
        sweep = slots.values();
        return;
      }
      if (next.value.expiresAt <= time) slots.delete(next.value.key);
    }
  }

  function evictOne(): void {
    for (;;) {
      let next = eviction.next();
      if (next.done) {
        eviction = slots.values();
        next = eviction.next();
        if (next.done) return;
      }
      const slot = next.value;
      slots.delete(slot.key);
      if (!slot.used) return;
      // A second chance: to the end of the line, where the cursor meets it again later.
      slot.used = false;
      slots.set(slot.key, slot);
    }
  }

  function read(key: string, time: number) {
    const slot = slots.get(key);
    if (slot === undefined || slot.expiresAt <= time) return undefined;
    slot.used = true;
    return { value: slot.value, ttlMs: slot.expiresAt - time };
  }

  function write(key: string, value: unknown, ttlMs: number, time: number): void {
    const slot = slots.get(key);
    if (slot !== undefined) {
      slot.value = value;
      slot.expiresAt = time + ttlMs;
      slot.used = true;
      return;
    }
    slots.set(key, { key, value, expiresAt: time + ttlMs, used: false });
    if (slots.size > maxKeys) evictOne();
  }

  return {
    get size() {
      return slots.size;
    },
    run(script: Script, keys: readonly string[], args: readonly Arg[]): Promise<Reply> {
      const time = now();
      sweepSome(time);
      const entries = [];
      for (const key of keys) entries.push(read(key, time));
      const { reply, writes } = script.twin(time, entries, args);
      for (let i = 0; i < writes.length; i++) {
        const w = writes[i];
        const key = keys[i];
        if (w === undefined || key === undefined) continue;
        if (w === null) slots.delete(key);
        else write(key, w.value, w.ttlMs, time);
      }
      return Promise.resolve(reply);
    },
    delete(keys: readonly string[]): Promise<void> {
      for (const key of keys) slots.delete(key);
      return Promise.resolve();
    },
  };
}
