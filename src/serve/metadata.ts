import { at, type Reader } from './config-reader.js';

/** A value a google.protobuf.Struct can hold. */
export type JsonValue = null | boolean | number | string | readonly JsonValue[] | JsonObject;
export interface JsonObject {
  readonly [key: string]: JsonValue;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A rule's `metadata`: any map a Struct can carry, or an InvalidConfigError naming the bad part. */
export function parseMetadata(reader: Reader, path: string, value: unknown): JsonObject {
  if (!isObject(value)) return reader.fail(path, 'must be a map', value);
  return jsonOf(reader, path, value) as JsonObject;
}

function jsonOf(reader: Reader, path: string, value: unknown): JsonValue {
  if (value === null || typeof value === 'boolean' || typeof value === 'string') return value;
  if (typeof value === 'number') {
    // A Struct's number is a double; JSON, and so /json, has no NaN or infinity.
    if (!Number.isFinite(value)) reader.fail(path, 'must be a finite number', value);
    return value;
  }
  if (Array.isArray(value)) return value.map((item, i) => jsonOf(reader, `${path}[${i}]`, item));
  if (isObject(value) && Object.getPrototypeOf(value) === Object.prototype)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, jsonOf(reader, at(path, k), v)]));
  return reader.fail(path, 'must be a string, number, true, false, null, a list or a map', value);
}

/**
 * Merges `source` into `into` as envoyproxy/ratelimit merges its descriptors' metadata: a key
 * already there keeps its value, except that two maps under one key are merged the same way.
 */
export function mergeMetadata(into: Record<string, JsonValue>, source: JsonObject): void {
  for (const [key, value] of Object.entries(source)) {
    const held = into[key];
    if (held === undefined)
      into[key] = structuredClone(value); // later merges must not reach the rule's own
    else if (isObject(held) && isObject(value)) mergeMetadata(held, value);
  }
}
