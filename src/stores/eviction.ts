import { warn } from '../core/host.js';

/** Reads the server's memory section (INFO memory): its text, `name:value` lines. */
export type MemoryInfo = () => Promise<string>;

/** The fields of an INFO section, by name. */
function infoFields(info: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const line of info.split('\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) fields[line.slice(0, colon)] = line.slice(colon + 1).trim();
  }
  return fields;
}

/**
 * The warning for a server that may evict sluice's keys, or undefined if it cannot. Every key
 * sluice writes has a TTL, so the volatile-* policies may evict them as well as the allkeys-* ones:
 * only noeviction, or no memory limit at all, keeps a client's state until its TTL ends.
 */
export function evictionWarning(info: string): string | undefined {
  const fields = infoFields(info);
  const policy = fields.maxmemory_policy;
  const maxmemory = Number(fields.maxmemory);
  if (policy === undefined || policy === 'noeviction' || !(maxmemory > 0)) return undefined;
  return (
    `sluice: Redis runs with maxmemory-policy ${policy} and maxmemory ${maxmemory} bytes: under memory pressure it may ` +
    "evict sluice's keys, and a client whose state is evicted starts afresh, admitted past its limit. " +
    'Use maxmemory-policy noeviction, or a Redis of its own for sluice (docs/reliability.md, "Eviction").'
  );
}

/**
 * Reads the server's memory settings once and warns (process.emitWarning) if they let Redis evict
 * sluice's keys. INFO, unlike CONFIG GET, is a read of statistics that managed services and
 * least-privilege users allow; a server that refuses it anyway is not warned about.
 */
export function checkEviction(read: MemoryInfo): void {
  read().then(
    (info) => {
      const warning = evictionWarning(info);
      if (warning !== undefined) warn(warning, { code: 'SLUICE_EVICTABLE_KEYS' });
    },
    () => undefined,
  );
}
