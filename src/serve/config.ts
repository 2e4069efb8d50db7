import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { formatDuration } from '../core/duration.js';
import { InvalidConfigError } from '../core/errors.js';
import { Reader, at, readDocuments } from './config-reader.js';
import { parseLimits, type DenyAll, type Limit, type ReportedLimit, type RuleLease } from './limits.js';
import { parseMetadata, type JsonObject } from './metadata.js';

/** A node of a domain's descriptor tree. */
export interface RuleNode {
  readonly key: string;
  /** The value it matches exactly; undefined for a node matching any value of its key. */
  readonly value: string | undefined;
  /** For a value holding `*`: its text between the stars, each star matching any text (none too). */
  readonly pattern: readonly string[] | undefined;
  /** Its place in the tree, as envoyproxy/ratelimit names its statistics: `key_value.key2`. */
  readonly path: string;
  /** Where it was written, for messages. */
  readonly file: string;
  readonly limits: readonly Limit[];
  /** `requests_per_unit: 0`: every request is over it. */
  readonly denyAll: DenyAll | undefined;
  readonly unlimited: boolean;
  /** sluice's `lease`: its one limit decided through quota leases (docs/leases.md). */
  readonly lease: RuleLease | undefined;
  /** Where its `lease` is written, for messages. */
  readonly leaseAt: string;
  /** The `name`s of its rate limits, which `replaces` of another rule may name. */
  readonly names: readonly string[];
  readonly replaces: readonly string[];
  /** Where its `replaces` is written in its document, for messages. */
  readonly replacesAt: string;
  readonly shadowMode: boolean;
  readonly detailedMetric: boolean;
  readonly valueToMetric: boolean;
  readonly shareThreshold: boolean;
  /** Returned in a response's dynamic_metadata when this rule admits a descriptor. */
  readonly metadata: JsonObject | undefined;
  /** Where its `metadata` is written, for messages. */
  readonly metadataAt: string;
  readonly children: ReadonlyMap<string, Level>;
}

/** The nodes of one key at one level of the tree, in the order matching tries them. */
export interface Level {
  readonly exact: ReadonlyMap<string, RuleNode>;
  readonly wildcards: readonly RuleNode[];
  readonly any: RuleNode | undefined;
}

export interface Domain {
  readonly name: string;
  readonly files: readonly string[];
  readonly root: ReadonlyMap<string, Level>;
}

export interface ServeConfig {
  readonly domains: ReadonlyMap<string, Domain>;
  readonly files: readonly string[];
  /** The files' names and text as read: a reload that reads the same keeps its rules. */
  readonly source: string;
}

const DOCUMENT_FIELDS = ['domain', 'descriptors'];
const DESCRIPTOR_FIELDS = [
  'key',
  'value',
  'rate_limit',
  'rate_limits',
  'shadow_mode',
  'detailed_metric',
  'value_to_metric',
  'share_threshold',
  'metadata',
  'descriptors',
];
// envoyproxy/ratelimit's fields that sluice does not enforce: refused with the reason, not ignored.
const UNSUPPORTED_DESCRIPTOR_FIELDS = {
  quota_mode:
    'is not supported: sluice answers OVER_LIMIT for any descriptor over its limit (remove it, or keep this rule on envoyproxy/ratelimit)',
};

interface MutableLevel {
  exact: Map<string, RuleNode>;
  wildcards: RuleNode[];
  any: RuleNode | undefined;
}

/** Adds a node to its level, refusing a second node of the same key and value. */
function place(
  reader: Reader,
  path: string,
  levels: Map<string, MutableLevel>,
  node: RuleNode,
  other: (existing: RuleNode) => string,
): void {
  let level = levels.get(node.key);
  if (level === undefined) levels.set(node.key, (level = { exact: new Map(), wildcards: [], any: undefined }));
  const existing =
    node.value === undefined
      ? level.any
      : node.pattern !== undefined
        ? level.wildcards.find((w) => w.value === node.value)
        : level.exact.get(node.value);
  if (existing !== undefined) {
    reader.fail(
      path,
      `duplicate descriptor: key "${node.key}"${node.value === undefined ? '' : ` with value "${node.value}"`} is already defined${other(existing)}`,
    );
  }
  if (node.value === undefined) level.any = node;
  else if (node.pattern !== undefined) level.wildcards.push(node);
  else level.exact.set(node.value, node);
}

/** A descriptor's `value`: undefined when left out (any value of its key). */
function valueOf(reader: Reader, path: string, value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') reader.fail(path, 'must be a string', value);
  if (value === '') reader.fail(path, 'must not be empty (leave it out to match any value)', value);
  return value;
}

/** One descriptor map of a list, its nested descriptors parsed into `children`. */
function parseNode(
  reader: Reader,
  path: string,
  item: unknown,
  parentPath: string,
  names: Map<string, string>,
): RuleNode {
  const fields = reader.map(path, item, DESCRIPTOR_FIELDS, UNSUPPORTED_DESCRIPTOR_FIELDS);
  const key = reader.text(at(path, 'key'), fields.key);
  const value = valueOf(reader, at(path, 'value'), fields.value);
  const parsed = parseLimits(reader, path, fields);
  const nodePath = `${parentPath === '' ? '' : `${parentPath}.`}${key}${value === undefined ? '' : `_${value}`}`;
  const children = new Map<string, MutableLevel>();
  parseDescriptors(reader, at(path, 'descriptors'), fields.descriptors, nodePath, children, names);
  const metadataAt = at(path, 'metadata');
  const node: RuleNode = {
    key,
    value,
    pattern: value?.includes('*') ? value.split('*') : undefined,
    path: nodePath,
    file: reader.file,
    limits: parsed?.limits ?? [],
    denyAll: parsed?.denyAll,
    unlimited: parsed?.unlimited ?? false,
    lease: parsed?.lease,
    leaseAt: at(path, 'rate_limit.lease'),
    names: parsed?.names ?? [],
    replaces: parsed?.replaces ?? [],
    replacesAt: at(path, fields.rate_limits === undefined ? 'rate_limit.replaces' : 'rate_limits'),
    shadowMode: reader.flag(at(path, 'shadow_mode'), fields.shadow_mode),
    detailedMetric: reader.flag(at(path, 'detailed_metric'), fields.detailed_metric),
    valueToMetric: reader.flag(at(path, 'value_to_metric'), fields.value_to_metric),
    shareThreshold: reader.flag(at(path, 'share_threshold'), fields.share_threshold),
    metadata: fields.metadata === undefined ? undefined : parseMetadata(reader, metadataAt, fields.metadata),
    metadataAt,
    children,
  };
  if (node.shareThreshold && node.pattern === undefined)
    reader.fail(at(path, 'share_threshold'), 'applies to a wildcard value (one holding "*") only', true);
  if (node.metadata !== undefined && parsed === undefined)
    reader.fail(metadataAt, 'is returned for a rule that decides, so needs a "rate_limit" beside it');
  return node;
}

function parseDescriptors(
  reader: Reader,
  path: string,
  value: unknown,
  parentPath: string,
  levels: Map<string, MutableLevel>,
  names: Map<string, string>,
): void {
  reader.list(path, value).forEach((item, i) => {
    const itemPath = `${path}[${i}]`;
    const node = parseNode(reader, itemPath, item, parentPath, names);
    for (const name of node.names) {
      const where = names.get(name);
      if (where !== undefined) reader.fail(itemPath, `duplicate rate limit name; it is already used at ${where}`, name);
      names.set(name, `${reader.file} ${itemPath}`);
    }
    place(reader, itemPath, levels, node, (existing) => (existing.file === reader.file ? '' : ` in ${existing.file}`));
  });
}

/** Every node of a tree, depth first. */
export function* nodesOf(levels: ReadonlyMap<string, Level>): Generator<RuleNode> {
  for (const level of levels.values()) {
    for (const node of [...level.exact.values(), ...level.wildcards, ...(level.any ? [level.any] : [])]) {
      yield node;
      yield* nodesOf(node.children);
    }
  }
}

interface DomainDraft {
  name: string;
  files: string[];
  root: Map<string, MutableLevel>;
  names: Map<string, string>;
}

function parseFile(file: string, text: string, domains: Map<string, DomainDraft>): void {
  const seen = new Set<string>();
  const reader: Reader = new Reader(file);
  for (const content of readDocuments(reader, text)) {
    if (content === null || content === undefined) continue;
    const fields = reader.map('', content, DOCUMENT_FIELDS);
    if (typeof fields.domain !== 'string' || fields.domain === '')
      reader.fail('domain', 'must be a non-empty string', fields.domain);
    const name = fields.domain;
    if (seen.has(name))
      reader.fail(
        'domain',
        'duplicate domain in one file (several files may share a domain; one file names it once)',
        name,
      );
    seen.add(name);
    let domain = domains.get(name);
    if (domain === undefined) domains.set(name, (domain = { name, files: [], root: new Map(), names: new Map() }));
    domain.files.push(file);
    parseDescriptors(reader, 'descriptors', fields.descriptors, '', domain.root, domain.names);
  }
  if (seen.size === 0) reader.fail('', 'holds no document; expected a map with "domain" and "descriptors"');
}

/** Checks that every `replaces` of a domain names a rate limit of that domain. */
function checkReplaces(domain: DomainDraft): void {
  for (const node of nodesOf(domain.root)) {
    const missing = node.replaces.find((name) => !domain.names.has(name));
    if (missing !== undefined)
      throw new InvalidConfigError(
        node.file,
        node.replacesAt,
        missing,
        `names no rate limit of domain "${domain.name}"`,
      );
  }
}

/** The configuration files a path names: the file itself, or a directory's *.yaml and *.yml (not hidden ones). */
async function configFiles(path: string): Promise<string[]> {
  let isDirectory: boolean;
  try {
    isDirectory = (await stat(path)).isDirectory();
  } catch (error) {
    throw new InvalidConfigError(
      path,
      '',
      undefined,
      `cannot read it (${(error as NodeJS.ErrnoException).code ?? String(error)})`,
    );
  }
  if (!isDirectory) return [path];
  const names = (await readdir(path)).filter((name) => !name.startsWith('.') && /\.ya?ml$/.test(name)).sort();
  if (names.length === 0)
    throw new InvalidConfigError(path, '', undefined, 'the directory holds no .yaml or .yml file');
  return names.map((name) => join(path, name));
}

const METADATA_UNSENT =
  'is returned in dynamic_metadata, which this service sends only with --response-dynamic-metadata (createServer: responseDynamicMetadata: true), as envoyproxy/ratelimit does with RESPONSE_DYNAMIC_METADATA';
const LEASE_WITH_PENALTY =
  'is refused with --penalty (createServer: penalty): leases admit without the store, so denials would not be in a row, and a block would not stop the leases at once';

/** Throws `problem` at the first rule of `domain` that has the field `placeOf` gives the place of. */
function refuseField(domain: DomainDraft, placeOf: (node: RuleNode) => string | undefined, problem: string): void {
  for (const node of nodesOf(domain.root)) {
    const place = placeOf(node);
    if (place !== undefined) throw new InvalidConfigError(node.file, place, undefined, problem);
  }
}

/** How the configuration will be served. */
export interface ConfigOptions {
  /** Whether responses carry dynamic_metadata (default false): without it, a rule's `metadata` is refused. */
  readonly responseDynamicMetadata?: boolean;
  /** Whether the service has a penalty box (--penalty; default false): with it, a rule's `lease` is refused. */
  readonly penalty?: boolean;
}

/** Parses text of one file (or several) into a configuration, or throws the first InvalidConfigError. */
export function parseConfig(
  sources: readonly { file: string; text: string }[],
  options: ConfigOptions = {},
): ServeConfig {
  const domains = new Map<string, DomainDraft>();
  for (const { file, text } of sources) parseFile(file, text, domains);
  domains.forEach(checkReplaces);
  // Fields the service as started would not serve: `metadata` no response carries, a `lease` beside the penalty box.
  for (const domain of domains.values()) {
    if (options.responseDynamicMetadata !== true)
      refuseField(domain, (node) => (node.metadata === undefined ? undefined : node.metadataAt), METADATA_UNSENT);
    if (options.penalty === true)
      refuseField(domain, (node) => (node.lease === undefined ? undefined : node.leaseAt), LEASE_WITH_PENALTY);
  }
  return { domains, files: sources.map((s) => s.file), source: JSON.stringify(sources) };
}

/** Loads a configuration file, or every one in a directory, merged per domain. */
export async function loadConfig(path: string, options: ConfigOptions = {}): Promise<ServeConfig> {
  const files = await configFiles(path);
  const sources = await Promise.all(
    files.map(async (file) => {
      try {
        return { file, text: await readFile(file, 'utf8') };
      } catch (error) {
        throw new InvalidConfigError(
          file,
          '',
          undefined,
          `cannot read it (${(error as NodeJS.ErrnoException).code ?? String(error)})`,
        );
      }
    }),
  );
  return parseConfig(sources, options);
}

function describeReported({ requestsPerUnit, unit, name }: ReportedLimit): string {
  return `requests_per_unit=${requestsPerUnit}, unit=${unit}${name ? `, name=${name}` : ''}`;
}

/** The loaded rules as text, one line per rule (GET /rlconfig). */
export function describeConfig(config: ServeConfig): string {
  const lines: string[] = [];
  for (const domain of config.domains.values()) {
    for (const node of nodesOf(domain.root)) {
      const parts: string[] = [];
      if (node.unlimited) parts.push('unlimited');
      if (node.denyAll) parts.push(`denies every request (${describeReported(node.denyAll.reported)})`);
      for (const { policy, reported } of node.limits)
        parts.push(
          `${policy.algorithm} ${policy.limit} per ${formatDuration(policy.windowMs)} (${describeReported(reported)})`,
        );
      if (node.lease) parts.push(`leased ${node.lease.units} at a time for ${formatDuration(node.lease.ms)}`);
      if (node.replaces.length > 0) parts.push(`replaces ${node.replaces.join(', ')}`);
      if (node.shadowMode) parts.push('shadow_mode');
      if (node.shareThreshold) parts.push('share_threshold');
      if (node.metadata) parts.push(`metadata ${JSON.stringify(node.metadata)}`);
      if (parts.length > 0) lines.push(`${domain.name}.${node.path}: ${parts.join('; ')}`);
    }
  }
  return lines.join('\n') + (lines.length > 0 ? '\n' : '');
}
