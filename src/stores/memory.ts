import { InvalidOptionError } from '../core/errors.js';
import { splitKey } from '../core/keys.js';
import { emptyCell, type Arg, type Cell, type Reply, type Script } from '../engine/script.js';
import { optionsObject, positiveInteger } from '../core/validate.js';
import { asLocalStore, type Store } from '../engine/store.js';

export interface MemoryStoreOptions {
  /**
   * The most Redis keys' worth of state held (a client's block, strikes and each policy's state count
   * one each); past it, the state of a client not used lately is evicted whole (nearly least recently
   * used). Default 100,000.
   */
  maxKeys?: number;
  /** The clock, in ms since the epoch (a fraction is dropped). Default Date.now; tests may pass a fake one. */
  now?: () => number;
}

/** One part of a client's state: what Redis holds under one key. */
interface Part {
  /** `<prefix> <suffix>`: which limiter's part, and which part (see partName). */
  name: string;
  value: unknown;
  expiresAt: number;
  next: Part | undefined;
}

/**
 * Everything held for one client key, under the key itself: a call finds its client with one
 * lookup of the string it was given (whose hash the engine keeps), not of a key built per call.
 * The client is the first of its parts, chained: most clients hold one part (a policy's state; a
 * block is rare), which a call then reads without touching another object.
 */
interface Client extends Part {
  readonly id: string;
  /** Used since eviction last looked at it: it gets a second chance instead of being evicted. */
  used: boolean;
}

// Each part added checks this many clients for expired parts, continuing where the last one
// stopped: expired state is reclaimed without a timer per key and without a timer keeping the
// process alive, and as fast as new state arrives. Only new state makes the store grow, so only
// it pays for the sweep; a call on state already held touches no other client's memory.
const SWEEP_PER_NEW_PART = 2;

export interface MemoryStore extends Store {
  /** How many keys are held now, expired ones not yet swept included. */
  readonly size: number;
}

/** State in this process, decided by the algorithms' TypeScript twins: the same semantics as Redis. */
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  const o = optionsObject('memoryStore', options, ['maxKeys', 'now']);
  const maxKeys = o.maxKeys === undefined ? 100_000 : positiveInteger('maxKeys', o.maxKeys);
  if (o.now !== undefined && typeof o.now !== 'function')
    throw new InvalidOptionError('now', o.now, 'a function returning ms');
  const now = (o.now as (() => number) | undefined) ?? Date.now;
  // Clients in insertion order, each updated in place. Eviction is "second chance" (CLOCK): from
  // the oldest, a client used since it was last looked at is moved to the end and spared, the
  // first one unused is evicted. Nearly LRU, without moving a client on every use (which costs a
  // delete and an insert, and makes the Map rehash as its holes pile up).
  const clients = new Map<string, Client>();
  // Parts held by all clients: the keys Redis would hold.
  let held = 0;
  let sweep = clients.values();
  // Eviction keeps its place: a fresh iterator would step again over every entry deleted at the
  // front and not yet compacted away, making each insert past maxKeys cost O(maxKeys) under a
  // flood of new keys.
  let eviction = clients.values();
  // The clock's last reading. A part is live while the clock has not reached its expiry; once it
  // has, the part is gone for good, as in Redis, which deletes an expired key when it meets it or
  // sweeps it, even if its clock steps back afterwards.
  let lastTime = -Infinity;

  function partCount(client: Client): number {
    let count = 0;
    for (let part: Part | undefined = client; part; part = part.next) count++;
    return count;
  }

  function forget(client: Client): void {
    clients.delete(client.id);
    held -= partCount(client);
  }

  function partOf(client: Client | undefined, name: string): Part | undefined {
    // Lengths first: two names of one length are rare, and comparing two distinct strings calls
    // out of optimized code, once per call for the block part that most clients do not hold.
    // `!== undefined`, not truthiness, which optimized code tests against every falsy kind.
    for (let part: Part | undefined = client; part !== undefined; part = part.next)
      if (part.name.length === name.length && part.name === name) return part;
    return undefined;
  }

  function remove(id: string, name: string): void {
    const client = clients.get(id);
    const part = partOf(client, name);
    if (client === undefined || part === undefined) return;
    held--;
    const { next } = client;
    if (part !== client) {
      let before: Part = client;
      while (before.next !== part) before = before.next as Part;
      before.next = part.next;
    } else if (next === undefined) {
      clients.delete(id);
    } else {
      // The client object stays (the map holds it); the second part's state moves into it.
      client.name = next.name;
      client.value = next.value;
      client.expiresAt = next.expiresAt;
      client.next = next.next;
    }
  }

  function dropExpired(client: Client, time: number): void {
    let before: Part = client;
    for (let part = client.next; part; part = part.next) {
      if (part.expiresAt > time) before = part;
      else {
        before.next = part.next;
        held--;
      }
    }
    // The first part last: removing it moves the second one's state into the client.
    if (client.expiresAt <= time) remove(client.id, client.name);
  }

  /** Drops every part expired by `time`: when the clock steps back from it, so none reads as live again. */
  function sweepAll(time: number): void {
    for (const client of clients.values()) dropExpired(client, time);
  }

  function sweepSome(time: number): void {
    for (let i = 0; i < SWEEP_PER_NEW_PART; i++) {
      const next = sweep.next();
      if (next.done) {
        sweep = clients.values();
        return;
      }
      dropExpired(next.value, time);
    }
  }

  /**
   * Makes room for one part: drops the expired parts of the first client that has any, or else
   * evicts the first client not used lately, never one that `spared` names; false if there is none
   * (every client seen twice: once to clear its use, once more to find it still unused).
   */
  function evictOne(spared: (id: string) => boolean, time: number): boolean {
    for (let looked = 0; looked <= 2 * clients.size; looked++) {
      let next = eviction.next();
      if (next.done) {
        eviction = clients.values();
        next = eviction.next();
        if (next.done) return false;
      }
      const client = next.value;
      // Expired state goes before any live client's, used or not: Redis would hold none of it.
      const live = held;
      dropExpired(client, time);
      if (held < live) return true;
      forget(client);
      if (!client.used && !spared(client.id)) return true;
      // A second chance: to the end of the line, where the cursor meets it again later.
      client.used = false;
      clients.set(client.id, client);
      held += partCount(client);
    }
    return false;
  }

  /** Writes one part; `client` is the client `id` names, if the store holds it. */
  function write(
    client: Client | undefined,
    id: string,
    name: string,
    value: unknown,
    expiresAt: number,
    time: number,
  ): void {
    if (client === undefined) {
      clients.set(id, { id, used: false, name, value, expiresAt, next: undefined });
    } else {
      client.used = true;
      const part = partOf(client, name);
      if (part !== undefined) {
        part.value = value;
        part.expiresAt = expiresAt;
        return;
      }
      client.next = { name, value, expiresAt, next: client.next };
    }
    held++;
    sweepSome(time);
  }

  // The cells of a step of n keys, reused from step to step (a step is synchronous, and a twin
  // keeps no cell): a step allocates no entry per key.
  const cellsByCount: Cell[][] = [];

  function cellsFor(count: number): Cell[] {
    let cells = cellsByCount[count];
    if (cells === undefined) cellsByCount[count] = cells = Array.from({ length: count }, () => emptyCell());
    return cells;
  }

  /** One atomic step on parts of clients: `ids` is one client's id, or each part's own. */
  function execute(
    ids: string | readonly string[],
    names: readonly string[],
    script: Script,
    args: readonly Arg[],
  ): Reply {
    // Whole ms, as Redis's TIME is read: a clock of fractional ms (performance.timeOrigin +
    // performance.now()) would give fractional waits. Anything else is refused before a write.
    const read = now();
    const time = Math.floor(read);
    if (typeof read !== 'number' || !Number.isSafeInteger(time))
      throw new InvalidOptionError('now', read, 'a function returning ms since the epoch');
    // Written only when it changes: each write of a new time costs a write barrier.
    if (time !== lastTime) {
      if (time < lastTime) sweepAll(lastTime);
      lastTime = time;
    }
    const cells = cellsFor(names.length);
    // One client's parts (the limiter's own calls) are found with one lookup and no comparison.
    const oneClient = typeof ids === 'string';
    let client = oneClient ? clients.get(ids) : undefined;
    for (let i = 0; i < names.length; i++) {
      if (!oneClient && client?.id !== ids[i]) client = clients.get(ids[i] as string);
      const part = partOf(client, names[i] as string);
      const cell = cells[i] as Cell;
      cell.written = false;
      if (part === undefined || part.expiresAt <= time) {
        cell.held = false;
        cell.value = undefined;
        continue;
      }
      (client as Client).used = true;
      cell.held = true;
      cell.value = part.value;
      cell.ttlMs = part.expiresAt - time;
    }
    const reply = script.twin(time, cells, args);
    for (let i = 0; i < cells.length; i++) {
      const cell = cells[i] as Cell;
      const { value } = cell;
      // A cell holds no state past its step: what it read may be evicted.
      cell.value = undefined;
      if (!cell.written) continue;
      const id = oneClient ? ids : (ids[i] as string);
      // The client read above is written without looking it up again, unless a removal may have
      // taken it out of the map.
      if (oneClient ? client === undefined : client?.id !== id) client = clients.get(id);
      if (!cell.held) {
        remove(id, names[i] as string);
        client = undefined;
      } else {
        write(client, id, names[i] as string, value, time + cell.ttlMs, time);
      }
    }
    if (held > maxKeys) makeRoom(ids, time);
    return reply;
  }

  /**
   * Past maxKeys, other clients make room: the state a call just wrote (for `ids`) is kept even
   * when one client's parts alone outnumber maxKeys, or that client would never be limited. (Apart
   * from execute: its closures would cost execute a context per call.)
   */
  function makeRoom(ids: string | readonly string[], time: number): void {
    const ownClient = typeof ids === 'string' ? (id: string) => id === ids : (id: string) => ids.includes(id);
    while (held > maxKeys && evictOne(ownClient, time));
  }

  /** Each Redis key's client and part; a key sluice does not write is its own client, of one unnamed part. */
  function split(keys: readonly string[]): { ids: string[]; names: string[] } {
    const ids: string[] = [];
    const names: string[] = [];
    for (const key of keys) {
      const found = splitKey(key);
      ids.push(found?.id ?? key);
      names.push(found?.part ?? '');
    }
    return { ids, names };
  }

  const store: MemoryStore = {
    get size() {
      return held;
    },
    run(script, keys, args) {
      const { ids, names } = split(keys);
      // A copy: the twin reuses its reply, and this one is read after later steps.
      return Promise.resolve(execute(ids, names, script, args).slice());
    },
  };
  return asLocalStore(store, execute);
}
