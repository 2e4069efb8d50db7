import { concurrency, fixedWindow, gcra, slidingLog, slidingWindow, tokenBucket, type Policy } from '../src/index.js';

/**
 * What a policy promises about the calls Redis admitted, in the Redis server's time (ms), as the
 * checker verifies it. See docs/reliability.md, "Chaos soak", for each definition.
 */
export type Invariant =
  | { readonly kind: 'fixed-window'; readonly limit: number; readonly windowMs: number }
  | { readonly kind: 'sliding-log'; readonly limit: number; readonly windowMs: number }
  /** The token bucket and GCRA: at most `burst` + one per `intervalMs` over any span. */
  | { readonly kind: 'rate'; readonly burst: number; readonly intervalMs: number }
  | { readonly kind: 'sliding-window'; readonly limit: number; readonly windowMs: number }
  | { readonly kind: 'concurrency'; readonly limit: number; readonly leaseMs: number };

export interface SoakLimiter {
  readonly name: string;
  readonly policy: Policy;
  readonly invariant: Invariant;
  /** A quota lease (createLimiter's `lease`): the limiter admits from units it took ahead. */
  readonly lease?: { readonly units: number; readonly ms: number };
  /** The client keys its callers pick from. */
  readonly keys: readonly string[];
}

// Small limits over short windows: many clients share few keys, so most keys are over their limit
// much of the time, and a window turns over every second.
const LIMIT = 5;
const WINDOW_MS = 1_000;
// A whole number of ms per unit, so the rate bound is exact in the server's integer ms.
const INTERVAL_MS = WINDOW_MS / LIMIT;
const SLOTS = 2;
const LEASE_MS = 1_000;

/** The client keys every worker hammers: spread over the cluster's slots, shared by the unleased limiters. */
const soakKeys: readonly string[] = Array.from({ length: 4 }, (_, i) => `client-${i}`);
/** The leased limiters' own keys: a leased policy shares no state with the same policy unleased. */
const leasedKeys: readonly string[] = Array.from({ length: 4 }, (_, i) => `leased-${i}`);

/** One limiter per algorithm; every worker builds them alike, under one prefix, on the same keys. */
const unleased: readonly SoakLimiter[] = [
  {
    name: 'fixedWindow',
    policy: fixedWindow({ limit: LIMIT, window: WINDOW_MS }),
    invariant: { kind: 'fixed-window', limit: LIMIT, windowMs: WINDOW_MS },
    keys: soakKeys,
  },
  {
    name: 'slidingLog',
    policy: slidingLog({ limit: LIMIT, window: WINDOW_MS }),
    invariant: { kind: 'sliding-log', limit: LIMIT, windowMs: WINDOW_MS },
    keys: soakKeys,
  },
  {
    name: 'tokenBucket',
    policy: tokenBucket({ capacity: LIMIT, refillPerSecond: 1_000 / INTERVAL_MS }),
    invariant: { kind: 'rate', burst: LIMIT, intervalMs: INTERVAL_MS },
    keys: soakKeys,
  },
  {
    name: 'gcra',
    policy: gcra({ limit: LIMIT, period: WINDOW_MS }),
    invariant: { kind: 'rate', burst: LIMIT, intervalMs: INTERVAL_MS },
    keys: soakKeys,
  },
  {
    name: 'slidingWindow',
    policy: slidingWindow({ limit: LIMIT, window: WINDOW_MS }),
    invariant: { kind: 'sliding-window', limit: LIMIT, windowMs: WINDOW_MS },
    keys: soakKeys,
  },
  {
    name: 'concurrency',
    policy: concurrency({ limit: SLOTS, leaseMs: LEASE_MS }),
    invariant: { kind: 'concurrency', limit: SLOTS, leaseMs: LEASE_MS },
    keys: soakKeys,
  },
];

/** The limiter `name` with a lease of `units` (of the limit of 5) for `ms`, on the leased keys. */
function leased(name: string, units: number, ms: number): SoakLimiter {
  const soak = unleased.find((l) => l.name === name);
  if (!soak) throw new Error(`no soak limiter ${name}`);
  return { ...soak, name: `${name}+lease`, lease: { units, ms }, keys: leasedKeys };
}

/** The limiters, and a leased one per algorithm that takes a lease. */
export const soakLimiters: readonly SoakLimiter[] = [
  ...unleased,
  leased('fixedWindow', 3, 1_000),
  leased('slidingWindow', 2, 500),
  leased('tokenBucket', 3, 600),
  leased('gcra', 2, 300),
];

/** How long a limiter waits for Redis before its failure policy answers. */
export const TIMEOUT_MS = 500;
