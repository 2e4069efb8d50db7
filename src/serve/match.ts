import type { Domain, Level, RuleNode } from './config.js';

export interface Entry {
  readonly key: string;
  readonly value: string;
}

/** The rule a request descriptor reaches, and the key its state lives under. */
export interface Match {
  readonly node: RuleNode;
  /** The limiter key: the domain and the entries (a shared wildcard's pattern instead of its value). */
  readonly key: string;
  /** The rule's name in metrics, as envoyproxy/ratelimit names its statistics (see metricName). */
  readonly metricRule: string;
}

/**
 * Whether `value` matches a wildcard value split on its stars: it starts with the first part, ends
 * with the last, and holds the others in order between them, each star standing for any text.
 */
export function matchesPattern(parts: readonly string[], value: string): boolean {
  const first = parts[0] as string;
  const last = parts[parts.length - 1] as string;
  if (value.length < first.length + last.length || !value.startsWith(first) || !value.endsWith(last)) return false;
  let from = first.length;
  const end = value.length - last.length;
  for (let i = 1; i < parts.length - 1; i++) {
    const part = parts[i] as string;
    const found = value.indexOf(part, from);
    if (found < 0 || found + part.length > end) return false;
    from = found + part.length;
  }
  return true;
}

// JSON.stringify writes a string as it is, in quotes, unless it holds one of these.
// eslint-disable-next-line no-control-regex -- control characters are among what JSON escapes
const PLAIN_JSON = /^[^"\\\u0000-\u001f\ud800-\udfff]*$/;

/** `text` as JSON.stringify writes it: most need no escaping, and the test is cheaper than the call. */
export function jsonString(text: string): string {
  return PLAIN_JSON.test(text) ? `"${text}"` : JSON.stringify(text);
}

/**
 * The limiter key a descriptor counts under: the JSON of [domain, key, value, ...], with `values`
 * (a shared wildcard's pattern, by entry) in place of the entries' own where given.
 */
export function limiterKey(domain: string, entries: readonly Entry[], values?: readonly string[]): string {
  let key = `[${jsonString(domain)}`;
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i] as Entry;
    key += `,${jsonString(entry.key)},${jsonString(values?.[i] ?? entry.value)}`;
  }
  return `${key}]`;
}

/** The node an entry takes at a level: its key and value, else the first wildcard it matches, else its key alone. */
function step(level: Level | undefined, value: string): RuleNode | undefined {
  if (level === undefined) return undefined;
  const exact = level.exact.get(value);
  if (exact !== undefined) return exact;
  for (const node of level.wildcards) if (matchesPattern(node.pattern as readonly string[], value)) return node;
  return level.any;
}

/**
 * envoyproxy/ratelimit's matching: the entries walk the domain's tree level by level, each taking
 * the node `step` finds. The rule is the node the last entry reaches; an entry that matches nothing
 * leaves the descriptor without a rule (not limited).
 */
export function matchDescriptor(domain: Domain, entries: readonly Entry[]): Match | undefined {
  let levels = domain.root;
  let node: RuleNode | undefined;
  let valueInMetric = false;
  // Made only for a shared wildcard (rare): the values the key is written with.
  let shared: string[] | undefined;
  for (let i = 0; i < entries.length; i++) {
    const { key, value } = entries[i] as Entry;
    node = step(levels.get(key), value);
    if (node === undefined) return undefined;
    if (node.shareThreshold) (shared ??= entries.map((e) => e.value))[i] = node.value as string;
    valueInMetric ||= node.valueToMetric;
    levels = node.children;
  }
  if (node === undefined) return undefined;
  return {
    node,
    key: limiterKey(domain.name, entries, shared),
    metricRule: node.detailedMetric || valueInMetric ? metricName(domain, entries, node.detailedMetric) : node.path,
  };
}

/**
 * A matched descriptor's name in metrics, for a rule with `detailed_metric` or a path with
 * `value_to_metric`, as envoyproxy/ratelimit names it: with `detailed_metric`, every entry's
 * `key_value`; otherwise the rule's path, with the request's value for a node with
 * `value_to_metric`. A shared wildcard (`share_threshold`) is named by its pattern in both.
 */
function metricName(domain: Domain, entries: readonly Entry[], detailed: boolean): string {
  let levels = domain.root;
  const parts: string[] = [];
  for (const { key, value } of entries) {
    const node = step(levels.get(key), value) as RuleNode;
    if (node.shareThreshold) parts.push(`${key}_${node.value as string}`);
    else if (detailed) parts.push(value === '' ? key : `${key}_${value}`);
    else if (node.pattern !== undefined) parts.push(`${key}_${node.valueToMetric ? value : (node.value as string)}`);
    else if (node.value !== undefined || (node.valueToMetric && value !== '')) parts.push(`${key}_${value}`);
    else parts.push(key);
    levels = node.children;
  }
  return parts.join('.');
}
