import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { LineCounter, parseAllDocuments } from 'yaml';
import { fixedWindow } from '../algorithms/fixed-window.js';
import { gcra } from '../algorithms/gcra.js';
import { slidingLog } from '../algorithms/sliding-log.js';
import { slidingWindow } from '../algorithms/sliding-window.js';
import { tokenBucket } from '../algorithms/token-bucket.js';
import { formatDuration, parseDuration } from '../core/duration.js';
import { InvalidConfigError, InvalidOptionError } from '../core/errors.js';
import type { Policy } from '../core/types.js';

/** envoyproxy/ratelimit's units, as Envoy's RateLimitUnit names them, with their length. */
export const UNIT_MS = { SECOND: 1_000, MINUTE: 60_000, HOUR: 3_600_000, DAY: 86_400_000 } as const;
export type UnitName = keyof typeof UNIT_MS | 'UNKNOWN';

/** The limit a descriptor status reports as `current_limit`. */
export interface ReportedLimit {
  readonly requestsPerUnit: number;
  /** UNKNOWN for a `window` that is no whole unit ('5m'): the RateLimit headers then tell it. */
  readonly unit: UnitName;
  readonly name?: string;
}

/** One `rate_limit` of a rule: the sluice policy it builds and what Envoy is told about it. */
export interface Limit {
  readonly policy: Policy;
  readonly reported: ReportedLimit;
}

/** A node of a domain's descriptor tree. */
export interface RuleNode {
  readonly key: string;
  /** The value it matches exactly; undefined for a node matching any value of its key. */
  readonly value: string | undefined;
  /** For a value ending in `*`: the prefix a request's value must start with. */
  readonly wildcard: string | undefined;
  /** Its place in the tree, as envoyproxy/ratelimit names its statistics: `key_value.key2`. */
  readonly path: string;
  /** Where it was written, for messages. */
  readonly file: string;
  readonly limits: readonly Limit[];
  readonly unlimited: boolean;
  /** The `name`s of its rate limits, which `replaces` of another rule may name. */
  readonly names: readonly string[];
  readonly replaces: readonly string[];
  /** Where its `replaces` is written in its document, for messages. */
  readonly replacesAt: string;
  readonly shadowMode: boolean;
  readonly detailedMetric: boolean;
  readonly shareThreshold: boolean;
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
  'descriptors',
];
const RATE_LIMIT_FIELDS = [
  'unit',
  'requests_per_unit',
  'name',
  'unlimited',
  'replaces',
  'algorithm',
  'window',
  'burst',
];
const ALGORITHMS = ['fixed_window', 'sliding_log', 'sliding_window', 'token_bucket', 'gcra'] as const;
type AlgorithmName = (typeof ALGORITHMS)[number];
// Names that sluice's RateLimit headers can carry as they are; any other name is kept for `replaces` only.
const HEADER_SAFE_NAME = /^[A-Za-z0-9_.:-]{1,64}$/;

type Fields = Record<string, unknown>;

/** Reads one YAML document's parts, each failure an InvalidConfigError naming the file and path. */
class Reader {
  constructor(readonly file: string) {}

  fail(path: string, problem: string, value?: unknown): never {
    throw new InvalidConfigError(this.file, path, value, problem);
  }

  map(path: string, value: unknown, known: readonly string[]): Fields {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) this.fail(path, 'must be a map', value);
    const fields = value as Fields;
    const unknown = Object.keys(fields).find((name) => !known.includes(name));
    if (unknown !== undefined)
      this.fail(join2(path, unknown), `unknown field "${unknown}"; the fields here are ${known.join(', ')}`);
    return fields;
  }

  list(path: string, value: unknown): readonly unknown[] {
    if (value === undefined || value === null) return [];
    if (!Array.isArray(value)) this.fail(path, 'must be a list', value);
    return value;
  }

  flag(path: string, value: unknown): boolean {
    if (value === undefined) return false;
    if (typeof value !== 'boolean') this.fail(path, 'must be true or false', value);
    return value;
  }

  text(path: string, value: unknown): string {
    if (typeof value !== 'string' || value === '') this.fail(path, 'must be a non-empty string', value);
    return value;
  }
}

function join2(path: string, field: string): string {
  return path === '' ? field : `${path}.${field}`;
}

/** The option a policy factory names, as the YAML field that gave it. */
const FIELD_OF_OPTION: Readonly<Record<string, string>> = {
  limit: 'requests_per_unit',
  refillPerSecond: 'requests_per_unit',
  capacity: 'burst',
  burst: 'burst',
  window: 'window',
  period: 'window',
  name: 'name',
};

function buildPolicy(
  algorithm: AlgorithmName,
  requestsPerUnit: number,
  windowMs: number,
  burst: number | undefined,
  name: string | undefined,
): Policy {
  const named = name === undefined ? {} : { name };
  switch (algorithm) {
    case 'fixed_window':
      return fixedWindow({ limit: requestsPerUnit, window: windowMs, ...named });
    case 'sliding_log':
      return slidingLog({ limit: requestsPerUnit, window: windowMs, ...named });
    case 'sliding_window':
      return slidingWindow({ limit: requestsPerUnit, window: windowMs, ...named });
    case 'token_bucket':
      return tokenBucket({
        capacity: burst ?? requestsPerUnit,
        refillPerSecond: (requestsPerUnit * 1000) / windowMs,
        ...named,
      });
    case 'gcra':
      return gcra({ limit: requestsPerUnit, period: windowMs, ...(burst === undefined ? {} : { burst }), ...named });
  }
}

/** The Envoy unit a window is exactly, else UNKNOWN. */
function unitOf(windowMs: number): UnitName {
  const unit = (Object.keys(UNIT_MS) as (keyof typeof UNIT_MS)[]).find((u) => UNIT_MS[u] === windowMs);
  return unit ?? 'UNKNOWN';
}

interface ParsedLimit {
  readonly limits: readonly Limit[];
  readonly unlimited: boolean;
  readonly names: readonly string[];
  readonly replaces: readonly string[];
}

function parseRateLimit(reader: Reader, path: string, value: unknown): ParsedLimit {
  const fields = reader.map(path, value, RATE_LIMIT_FIELDS);
  const at = (field: string) => join2(path, field);
  const name = fields.name === undefined ? undefined : reader.text(at('name'), fields.name);
  const replaces = reader.list(at('replaces'), fields.replaces).map((item, i) => {
    const replaced = reader.map(`${at('replaces')}[${i}]`, item, ['name']);
    return reader.text(`${at('replaces')}[${i}].name`, replaced.name);
  });
  if (name !== undefined && replaces.includes(name))
    reader.fail(at('replaces'), `a rate limit cannot replace itself ("${name}")`);
  const unlimited = reader.flag(at('unlimited'), fields.unlimited);
  if (unlimited) {
    const counted = ['unit', 'window', 'requests_per_unit', 'algorithm', 'burst'].find(
      (field) => fields[field] !== undefined,
    );
    if (counted !== undefined) reader.fail(at(counted), `"unlimited: true" takes no ${counted}`, fields[counted]);
    return { limits: [], unlimited, names: name === undefined ? [] : [name], replaces };
  }
  const rpu = fields.requests_per_unit;
  if (typeof rpu !== 'number' || !Number.isInteger(rpu) || rpu < 1 || rpu > 0xffff_ffff) {
    reader.fail(at('requests_per_unit'), 'must be a whole number from 1 to 4294967295', rpu);
  }
  if (fields.unit !== undefined && fields.window !== undefined)
    reader.fail(at('window'), 'give "unit" or "window", not both', fields.window);
  let windowMs: number;
  let unit: UnitName;
  if (fields.window !== undefined) {
    windowMs = windowOf(reader, at('window'), fields.window);
    unit = unitOf(windowMs);
  } else {
    const given = fields.unit;
    unit = (typeof given === 'string' ? given.toUpperCase() : '') as UnitName;
    if (!Object.hasOwn(UNIT_MS, unit))
      reader.fail(at('unit'), 'must be second, minute, hour or day (or give a "window" such as 5m)', given);
    windowMs = UNIT_MS[unit as keyof typeof UNIT_MS];
  }
  const algorithm = (fields.algorithm ?? 'fixed_window') as AlgorithmName;
  if (!ALGORITHMS.includes(algorithm))
    reader.fail(at('algorithm'), `must be one of ${ALGORITHMS.join(', ')}`, fields.algorithm);
  let burst: number | undefined;
  if (fields.burst !== undefined) {
    if (algorithm !== 'token_bucket' && algorithm !== 'gcra')
      reader.fail(at('burst'), 'applies to token_bucket and gcra only', fields.burst);
    burst = fields.burst as number;
  }
  const policyName = name !== undefined && HEADER_SAFE_NAME.test(name) ? name : undefined;
  let policy: Policy;
  try {
    policy = buildPolicy(algorithm, rpu, windowMs, burst, policyName);
  } catch (error) {
    if (!(error instanceof InvalidOptionError)) throw error;
    const field = FIELD_OF_OPTION[error.option] ?? error.option;
    reader.fail(
      at(field === 'window' && fields.window === undefined ? 'unit' : field),
      error.message.replace(/^sluice: option "[^"]+" must be /, `for ${algorithm}, must be `).replace(/; got .*$/, ''),
      fields[field] ?? fields.unit,
    );
  }
  return {
    limits: [{ policy, reported: { requestsPerUnit: rpu, unit, ...(name === undefined ? {} : { name }) } }],
    unlimited,
    names: name === undefined ? [] : [name],
    replaces,
  };
}

function windowOf(reader: Reader, path: string, value: unknown): number {
  try {
    return parseDuration('window', value);
  } catch {
    return reader.fail(path, "must be a duration such as '90s', '5m', '1h' (whole ms from 1 ms to 366 days)", value);
  }
}

/** A rule's limits: `rate_limit` (envoyproxy/ratelimit's one), or sluice's `rate_limits` (several, decided together). */
function parseLimits(reader: Reader, path: string, fields: Fields): ParsedLimit | undefined {
  if (fields.rate_limit !== undefined && fields.rate_limits !== undefined)
    reader.fail(join2(path, 'rate_limits'), 'give "rate_limit" or "rate_limits", not both');
  if (fields.rate_limit !== undefined) return parseRateLimit(reader, join2(path, 'rate_limit'), fields.rate_limit);
  if (fields.rate_limits === undefined) return undefined;
  const items = reader.list(join2(path, 'rate_limits'), fields.rate_limits);
  if (items.length === 0) reader.fail(join2(path, 'rate_limits'), 'must hold at least one rate limit');
  const parsed = items.map((item, i) => parseRateLimit(reader, `${join2(path, 'rate_limits')}[${i}]`, item));
  const unlimitedAt = parsed.findIndex((p) => p.unlimited);
  if (unlimitedAt >= 0)
    reader.fail(
      `${join2(path, 'rate_limits')}[${unlimitedAt}].unlimited`,
      'use "rate_limit: { unlimited: true }" on its own, not in a list',
    );
  return {
    limits: parsed.flatMap((p) => p.limits),
    unlimited: false,
    names: parsed.flatMap((p) => p.names),
    replaces: parsed.flatMap((p) => p.replaces),
  };
}

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
      : node.wildcard !== undefined
        ? level.wildcards.find((w) => w.value === node.value)
        : level.exact.get(node.value);
  if (existing !== undefined) {
    reader.fail(
      path,
      `duplicate descriptor: key "${node.key}"${node.value === undefined ? '' : ` with value "${node.value}"`} is already defined${other(existing)}`,
    );
  }
  if (node.value === undefined) level.any = node;
  else if (node.wildcard !== undefined) level.wildcards.push(node);
  else level.exact.set(node.value, node);
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
    const at = `${path}[${i}]`;
    const fields = reader.map(at, item, DESCRIPTOR_FIELDS);
    if (typeof fields.key !== 'string' || fields.key === '')
      reader.fail(join2(at, 'key'), 'must be a non-empty string', fields.key);
    const key = fields.key;
    let descriptorValue: string | undefined;
    const valueField = fields.value;
    if (valueField !== undefined && valueField !== null) {
      if (typeof valueField !== 'string' && typeof valueField !== 'number' && typeof valueField !== 'boolean')
        reader.fail(join2(at, 'value'), 'must be a string', valueField);
      descriptorValue = String(valueField);
      if (descriptorValue === '')
        reader.fail(join2(at, 'value'), 'must not be empty (leave it out to match any value)', valueField);
    }
    const parsed = parseLimits(reader, at, fields);
    const nodePath = `${parentPath === '' ? '' : `${parentPath}.`}${key}${descriptorValue === undefined ? '' : `_${descriptorValue}`}`;
    const children = new Map<string, MutableLevel>();
    parseDescriptors(reader, join2(at, 'descriptors'), fields.descriptors, nodePath, children, names);
    const node: RuleNode = {
      key,
      value: descriptorValue,
      wildcard: descriptorValue?.endsWith('*') ? descriptorValue.slice(0, -1) : undefined,
      path: nodePath,
      file: reader.file,
      limits: parsed?.limits ?? [],
      unlimited: parsed?.unlimited ?? false,
      names: parsed?.names ?? [],
      replaces: parsed?.replaces ?? [],
      replacesAt: join2(at, fields.rate_limits === undefined ? 'rate_limit.replaces' : 'rate_limits'),
      shadowMode: reader.flag(join2(at, 'shadow_mode'), fields.shadow_mode),
      detailedMetric: reader.flag(join2(at, 'detailed_metric'), fields.detailed_metric),
      shareThreshold: reader.flag(join2(at, 'share_threshold'), fields.share_threshold),
      children,
    };
    reader.flag(join2(at, 'value_to_metric'), fields.value_to_metric);
    if (node.shareThreshold && node.wildcard === undefined)
      reader.fail(join2(at, 'share_threshold'), 'applies to a wildcard value (one ending in "*") only', true);
    for (const name of node.names) {
      const where = names.get(name);
      if (where !== undefined) reader.fail(at, `duplicate rate limit name; it is already used at ${where}`, name);
      names.set(name, `${reader.file} ${at}`);
    }
    place(reader, at, levels, node, (existing) => (existing.file === reader.file ? '' : ` in ${existing.file}`));
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
  const lineCounter = new LineCounter();
  const documents = parseAllDocuments(text, { uniqueKeys: true, prettyErrors: false, lineCounter });
  const list = Array.isArray(documents) ? documents : [documents];
  const seen = new Set<string>();
  const reader: Reader = new Reader(file);
  for (const document of list) {
    const [error] = document.errors;
    if (error) {
      // Text that is no YAML has no path inside a document: its place is a line and column.
      const { line, col } = lineCounter.linePos(error.pos[0]);
      reader.fail(`line ${line}, column ${col}`, `bad YAML: ${error.message}`);
    }
    const content: unknown = document.toJS();
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

/** Parses text of one file (or several) into a configuration, or throws the first InvalidConfigError. */
export function parseConfig(sources: readonly { file: string; text: string }[]): ServeConfig {
  const domains = new Map<string, DomainDraft>();
  for (const { file, text } of sources) parseFile(file, text, domains);
  domains.forEach(checkReplaces);
  return { domains, files: sources.map((s) => s.file), source: JSON.stringify(sources) };
}

/** Loads a configuration file, or every one in a directory, merged per domain. */
export async function loadConfig(path: string): Promise<ServeConfig> {
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
  return parseConfig(sources);
}

/** The loaded rules as text, one line per rule (GET /rlconfig). */
export function describeConfig(config: ServeConfig): string {
  const lines: string[] = [];
  for (const domain of config.domains.values()) {
    for (const node of nodesOf(domain.root)) {
      const parts: string[] = [];
      if (node.unlimited) parts.push('unlimited');
      for (const { policy, reported } of node.limits) {
        parts.push(
          `${policy.algorithm} ${policy.limit} per ${formatDuration(policy.windowMs)} (requests_per_unit=${reported.requestsPerUnit}, unit=${reported.unit}${reported.name ? `, name=${reported.name}` : ''})`,
        );
      }
      if (node.replaces.length > 0) parts.push(`replaces ${node.replaces.join(', ')}`);
      if (node.shadowMode) parts.push('shadow_mode');
      if (node.shareThreshold) parts.push('share_threshold');
      if (parts.length > 0) lines.push(`${domain.name}.${node.path}: ${parts.join('; ')}`);
    }
  }
  return lines.join('\n') + (lines.length > 0 ? '\n' : '');
}
