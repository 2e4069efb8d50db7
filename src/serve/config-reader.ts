import { LineCounter, isMap, isScalar, parseAllDocuments, visit, type Document } from 'yaml';
import { InvalidConfigError } from '../core/errors.js';

export type Fields = Record<string, unknown>;

/** Reads one YAML document's parts, each failure an InvalidConfigError naming the file and path. */
export class Reader {
  constructor(readonly file: string) {}

  fail(path: string, problem: string, value?: unknown): never {
    throw new InvalidConfigError(this.file, path, value, problem);
  }

  map(path: string, value: unknown, known: readonly string[], unsupported: Readonly<Fields> = {}): Fields {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) this.fail(path, 'must be a map', value);
    const fields = value as Fields;
    for (const name of Object.keys(fields)) {
      if (Object.hasOwn(unsupported, name)) this.fail(at(path, name), unsupported[name] as string);
      if (!known.includes(name))
        this.fail(at(path, name), `unknown field "${name}"; the fields here are ${known.join(', ')}`);
    }
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

/** A field's path below `path`: `descriptors[0].rate_limit`. */
export function at(path: string, field: string): string {
  return path === '' ? field : `${path}.${field}`;
}

// Fields whose values are names matched against a request's text, read as written.
const TEXT_FIELDS = new Set(['domain', 'key', 'value', 'name']);

/**
 * Keeps a name written as a number or a boolean (`value: 1.0`, `key: 010`) as its text, as
 * envoyproxy/ratelimit reads these fields: read as a number, `1.0` would match the request value "1".
 * `metadata` is the caller's data and keeps its types.
 */
function keepNamesAsWritten(document: Document): void {
  visit(document, {
    Pair(_, pair, path) {
      if (isScalar(pair.key) && pair.key.value === 'metadata') return visit.SKIP;
      const inMap = isMap(path[path.length - 1]);
      if (!inMap || !isScalar(pair.key) || !TEXT_FIELDS.has(String(pair.key.value))) return undefined;
      const value = pair.value;
      if (isScalar(value) && typeof value.value !== 'string' && value.value !== null && value.source !== undefined)
        value.value = value.source;
      return undefined;
    },
  });
}

/** The documents of a YAML file as plain values, or an InvalidConfigError at the first bad line. */
export function readDocuments(reader: Reader, text: string): unknown[] {
  const lineCounter = new LineCounter();
  const documents = parseAllDocuments(text, { uniqueKeys: true, prettyErrors: false, lineCounter });
  const list = Array.isArray(documents) ? documents : [documents];
  return list.map((document) => {
    const [error] = document.errors;
    if (error) {
      // Text that is no YAML has no path inside a document: its place is a line and column.
      const { line, col } = lineCounter.linePos(error.pos[0]);
      reader.fail(`line ${line}, column ${col}`, `bad YAML: ${error.message}`);
    }
    keepNamesAsWritten(document);
    return document.toJS() as unknown;
  });
}
