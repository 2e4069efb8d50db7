import type { Domain, RuleNode } from './config.js';

export interface Entry {
  readonly key: string;
  readonly value: string;
}

/** The rule a request descriptor reaches, and the key its state lives under. */
export interface Match {
  readonly node: RuleNode;
  /** The limiter key: the domain and the entries (a shared wildcard's pattern instead of its value). */
  readonly key: string;
  /** The rule's name in metrics: its path, or with `detailed_metric` the request's own entries. */
  readonly metricRule: string;
}

/**
 * envoyproxy/ratelimit's matching: the entries walk the domain's tree level by level; at each level
 * an entry takes the node of its key and value, else the first wildcard whose prefix its value
 * starts with, else the node of its key alone. The rule is the node the last entry reaches; an
 * entry that matches nothing leaves the descriptor without a rule (not limited).
 */
export function matchDescriptor(domain: Domain, entries: readonly Entry[]): Match | undefined {
  let levels = domain.root;
  let node: RuleNode | undefined;
  const keyParts: string[] = [domain.name];
  for (const { key, value } of entries) {
    const level = levels.get(key);
    node =
      level &&
      (level.exact.get(value) ?? level.wildcards.find((w) => value.startsWith(w.wildcard as string)) ?? level.any);
    if (node === undefined) return undefined;
    keyParts.push(key, node.shareThreshold ? (node.value as string) : value);
    levels = node.children;
  }
  if (node === undefined) return undefined;
  return {
    node,
    key: JSON.stringify(keyParts),
    metricRule: node.detailedMetric ? entries.map(({ key, value }) => `${key}_${value}`).join('.') : node.path,
  };
}
