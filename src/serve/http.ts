import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TlsOptions } from 'node:tls';
import { UNIT_NUMBERS, type UnitName } from './limits.js';
import type { Entry } from './match.js';
import { messageOf } from '../core/errors.js';
import { BadRequestError, type RateLimitRequest, type RateLimitResponse, type RequestDescriptor } from './messages.js';

/** What the HTTP port answers besides POST /json. */
export interface HttpRoutes {
  decide(request: RateLimitRequest): Promise<RateLimitResponse>;
  /** Why the service does not serve now (stopping, or its store fails and it denies then); undefined while it does. */
  unhealthy(): Promise<string | undefined>;
  metrics(): string | Promise<string>;
  rlconfig(): string;
  /** /dashboard and the paths under it, when the dashboard is on. */
  dashboard?: ((req: IncomingMessage, res: ServerResponse) => Promise<void>) | undefined;
}

// A ShouldRateLimit request is a few hundred bytes; anything near this is not one.
const MOST_BODY_BYTES = 1 << 20;

type Json = Record<string, unknown>;

/** A proto3 JSON object: a field under its lowerCamel or its original name, others refused. */
function object(field: string, value: unknown, names: Readonly<Record<string, string>>): Json {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new BadRequestError(field || 'body', 'must be a JSON object');
  const read: Json = {};
  for (const [name, item] of Object.entries(value)) {
    const known = names[name] ?? Object.values(names).find((camel) => camel === name);
    if (known === undefined)
      throw new BadRequestError(field ? `${field}.${name}` : name, 'is not a field of this message');
    read[known] = item;
  }
  return read;
}

function list(field: string, value: unknown): readonly unknown[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new BadRequestError(field, 'must be a JSON array');
  return value;
}

function text(field: string, value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string') throw new BadRequestError(field, 'must be a string');
  return value;
}

/** proto3 JSON integers: a number or a string of digits. */
function integer(field: string, value: unknown): number {
  if (value === undefined || value === null) return 0;
  const number = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof number !== 'number' || !Number.isSafeInteger(number) || number < 0)
    throw new BadRequestError(field, 'must be a non-negative whole number');
  return number;
}

/** proto3 JSON enums: the name, or the number. */
function unit(field: string, value: unknown): UnitName {
  const name =
    typeof value === 'number' ? UNIT_NUMBERS[value] : value === undefined || value === null ? 'UNKNOWN' : value;
  if (typeof name !== 'string' || !UNIT_NUMBERS.includes(name as UnitName))
    throw new BadRequestError(field, `must be one of ${UNIT_NUMBERS.join(', ')}`);
  return name as UnitName;
}

function entry(field: string, value: unknown): Entry {
  const e = object(field, value, { key: 'key', value: 'value' });
  return { key: text(`${field}.key`, e.key), value: text(`${field}.value`, e.value) };
}

function descriptor(field: string, value: unknown): RequestDescriptor {
  const d = object(field, value, { entries: 'entries', limit: 'limit', hits_addend: 'hitsAddend' });
  const parsed: { -readonly [K in keyof RequestDescriptor]: RequestDescriptor[K] } = {
    entries: list(`${field}.entries`, d.entries).map((e, i) => entry(`${field}.entries[${i}]`, e)),
  };
  if (d.limit !== undefined && d.limit !== null) {
    const limit = object(`${field}.limit`, d.limit, { requests_per_unit: 'requestsPerUnit', unit: 'unit' });
    parsed.limit = {
      requestsPerUnit: integer(`${field}.limit.requestsPerUnit`, limit.requestsPerUnit),
      unit: unit(`${field}.limit.unit`, limit.unit),
    };
  }
  // A UInt64Value wrapper is its bare value in JSON.
  if (d.hitsAddend !== undefined && d.hitsAddend !== null)
    parsed.hitsAddend = integer(`${field}.hitsAddend`, d.hitsAddend);
  return parsed;
}

/** A RateLimitRequest from its proto3 JSON form, or a BadRequestError naming the field. */
export function requestFromJson(body: unknown): RateLimitRequest {
  const r = object('', body, { domain: 'domain', descriptors: 'descriptors', hits_addend: 'hitsAddend' });
  return {
    domain: text('domain', r.domain),
    descriptors: list('descriptors', r.descriptors).map((d, i) => descriptor(`descriptors[${i}]`, d)),
    hitsAddend: integer('hitsAddend', r.hitsAddend),
  };
}

/** A proto3 JSON Duration: seconds with 0, 3 (here) or 9 fractional digits. */
function durationJson(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${(ms / 1000).toFixed(3)}s`;
}

/** The proto3 JSON form of a response: fields with their default value (0, empty) are left out, as protojson does. */
export function responseToJson(response: RateLimitResponse): Json {
  const json: Json = { overallCode: response.overallCode };
  json.statuses = response.statuses.map((s) => {
    const status: Json = { code: s.code };
    if (s.currentLimit) {
      const { requestsPerUnit, unit: limitUnit, name } = s.currentLimit;
      const currentLimit: Json = { requestsPerUnit };
      if (limitUnit !== 'UNKNOWN') currentLimit.unit = limitUnit;
      if (name) currentLimit.name = name;
      status.currentLimit = currentLimit;
    }
    if (s.limitRemaining !== 0) status.limitRemaining = s.limitRemaining;
    if (s.durationUntilResetMs !== undefined) status.durationUntilReset = durationJson(s.durationUntilResetMs);
    return status;
  });
  if (response.responseHeadersToAdd.length > 0) json.responseHeadersToAdd = response.responseHeadersToAdd;
  if (response.dynamicMetadata) json.dynamicMetadata = response.dynamicMetadata;
  return json;
}

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function problem(res: ServerResponse, status: number, title: string, detail: string): void {
  send(res, status, 'application/problem+json', JSON.stringify({ type: 'about:blank', title, status, detail }));
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MOST_BODY_BYTES) throw new BadRequestError('body', `must be at most ${MOST_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

async function postJson(req: IncomingMessage, res: ServerResponse, routes: HttpRoutes): Promise<void> {
  try {
    const body = await readBody(req);
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      throw new BadRequestError('body', 'is not JSON');
    }
    const response = await routes.decide(requestFromJson(parsed));
    send(
      res,
      response.overallCode === 'OVER_LIMIT' ? 429 : 200,
      'application/json',
      JSON.stringify(responseToJson(response)),
    );
  } catch (error) {
    if (error instanceof BadRequestError) problem(res, 400, 'Bad Request', error.message);
    else problem(res, 500, 'Internal Server Error', messageOf(error));
  }
}

async function route(req: IncomingMessage, res: ServerResponse, routes: HttpRoutes): Promise<void> {
  const path = (req.url ?? '/').split('?')[0];
  const only = (method: string): boolean => {
    if (req.method === method || (method === 'GET' && req.method === 'HEAD')) return true;
    res.setHeader('Allow', method === 'GET' ? 'GET, HEAD' : method);
    problem(res, 405, 'Method Not Allowed', `${path} takes ${method}`);
    return false;
  };
  if (routes.dashboard && (path === '/dashboard' || path?.startsWith('/dashboard/'))) return routes.dashboard(req, res);
  switch (path) {
    case '/json':
      if (only('POST')) await postJson(req, res, routes);
      return;
    case '/healthcheck':
      if (only('GET')) {
        const reason = await routes.unhealthy();
        send(res, reason === undefined ? 200 : 500, 'text/plain; charset=utf-8', `${reason ?? 'OK'}\n`);
      }
      return;
    case '/metrics':
      if (only('GET')) send(res, 200, 'text/plain; version=0.0.4; charset=utf-8', await routes.metrics());
      return;
    case '/rlconfig':
      if (only('GET')) send(res, 200, 'text/plain; charset=utf-8', routes.rlconfig());
      return;
    default:
      problem(
        res,
        404,
        'Not Found',
        `no route ${path}; the routes are POST /json, GET /healthcheck, /metrics and /rlconfig`,
      );
  }
}

/** Starts the HTTP server on `host:port` (0: any free port); with `tls`, HTTPS. */
export async function startHttp(
  routes: HttpRoutes,
  host: string,
  port: number,
  tls?: TlsOptions,
): Promise<{ server: Server | HttpsServer; port: number }> {
  const answer = (req: IncomingMessage, res: ServerResponse) => {
    route(req, res, routes).catch((error: unknown) => {
      if (!res.headersSent) problem(res, 500, 'Internal Server Error', messageOf(error));
      else res.destroy();
    });
  };
  const server = tls === undefined ? createHttpServer(answer) : createHttpsServer(tls, answer);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return { server, port: (server.address() as AddressInfo).port };
}

/** Stops taking connections, and resolves once the requests in flight are answered. */
export function stopHttp(server: Server | HttpsServer): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}
