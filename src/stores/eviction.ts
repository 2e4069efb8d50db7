/** Reads the server's memory settings (CONFIG GET maxmemory*), as name → value. */
export type MemorySettings = () => Promise<Record<string, string>>;

/**
 * The warning for a server that may evict sluice's keys, or undefined if it cannot. Every key
 * sluice writes has a TTL, so the volatile-* policies may evict them as well as the allkeys-* ones:
 * only noeviction, or no memory limit at all, keeps a client's state until its TTL ends.
 */
export function evictionWarning(settings: Record<string, string>): string | undefined {
  const policy = settings['maxmemory-policy'];
  const maxmemory = Number(settings.maxmemory);
  if (policy === undefined || policy === 'noeviction' || !(maxmemory > 0)) return undefined;
  return (
    `sluice: Redis runs with maxmemory-policy ${policy} and maxmemory ${maxmemory} bytes: under memory pressure it may ` +
    "evict sluice's keys, and a client whose state is evicted starts afresh, admitted past its limit. " +
    'Use maxmemory-policy noeviction, or a Redis of its own for sluice (docs/reliability.md, "Eviction").'
  );
}

/**
 * Reads the server's memory settings once and warns (process.emitWarning) if they let Redis evict
 * sluice's keys. A server that refuses CONFIG (managed services often do) is not warned about.
 */
export function checkEviction(read: MemorySettings): void {
  read().then(
    (settings) => {
      const warning = evictionWarning(settings);
      if (warning !== undefined) process.emitWarning(warning, { type: 'SluiceEvictionWarning', code: 'SLUICE_EVICTABLE_KEYS' });
    },
    () => undefined,
  );
}
