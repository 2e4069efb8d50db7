import { InvalidArgumentError, InvalidOptionError, messageOf } from '../core/errors.js';
import { optionsObject } from '../core/validate.js';
import { PAGE } from './page.js';
import { Recorder, type Dashboard } from './recorder.js';

/** A request as every adapter sees it: enough to route, authorise and answer it. */
export interface DashboardRequest {
  readonly method: string;
  /** The path and query (or a whole URL); the route is its last segment. */
  readonly url: string;
  readonly authorization?: string | undefined;
  /** The client's address, for `localOnly`; undefined when the runtime does not tell. */
  readonly remoteAddress?: string | undefined;
}

export interface DashboardResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

export interface DashboardHandlerOptions {
  /** Require `Authorization: Bearer <token>` for its data (the page itself holds none). */
  token?: string;
  /**
   * Answer only clients on this machine (a loopback address). Default true without a `token`,
   * false with one. A request whose address the runtime does not tell is refused while it is on.
   */
  localOnly?: boolean;
}

export type DashboardHandler = (request: DashboardRequest) => Promise<DashboardResponse>;

// The page loads nothing: its script and style are inline, and it fetches only its own data.
const PAGE_HEADERS = {
  'Content-Type': 'text/html; charset=utf-8',
  'Content-Security-Policy':
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
};
const JSON_HEADERS = {
  'Content-Type': 'application/json; charset=utf-8',
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
};
const MOST_TOP = 100;

/** Whether `address` is this machine's: 127.0.0.0/8 or ::1, IPv4-mapped or not. */
export function isLoopback(address: string | undefined): boolean {
  if (address === undefined) return false;
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  return v4.startsWith('127.') || address === '::1';
}

/** Equal strings, compared in a time that does not tell how much of `given` matched. */
function sameToken(given: string, token: string): boolean {
  let differ = given.length ^ token.length;
  for (let i = 0; i < token.length; i++) differ |= token.charCodeAt(i) ^ given.charCodeAt(i % (given.length || 1));
  return differ === 0;
}

function json(status: number, value: unknown, headers: Record<string, string> = {}): DashboardResponse {
  return { status, headers: { ...JSON_HEADERS, ...headers }, body: JSON.stringify(value) };
}

function problem(status: number, title: string, detail: string, headers?: Record<string, string>): DashboardResponse {
  return json(status, { type: 'about:blank', title, status, detail }, headers);
}

function validHandlerOptions(options: unknown): { token: string | undefined; localOnly: boolean } {
  const o = optionsObject('dashboard', options, ['token', 'localOnly']);
  if (o.token !== undefined && (typeof o.token !== 'string' || o.token.length < 16 || /\s/.test(o.token)))
    throw new InvalidOptionError('token', '(hidden)', 'a string of at least 16 characters without spaces');
  if (o.localOnly !== undefined && typeof o.localOnly !== 'boolean')
    throw new InvalidOptionError('localOnly', o.localOnly, 'true or false');
  const token = o.token;
  return { token, localOnly: o.localOnly ?? token === undefined };
}

/** The top count a snapshot asks for: ?top=N, from 1 to 100 (default 10). */
function topOf(query: URLSearchParams): number | undefined {
  const text = query.get('top');
  if (text === null) return 10;
  const top = Number(text);
  return /^\d+$/.test(text) && top >= 1 && top <= MOST_TOP ? top : undefined;
}

/**
 * The dashboard's routes, under wherever it is mounted: the page (any path), `…/data` (a
 * DashboardSnapshot as JSON; `?top=N`) and `…/key?key=…` (a KeyLookup, read with peek). GET and
 * HEAD only. Every adapter (node:http, Express, Fastify, Hono, `sluice serve`) answers through it.
 */
export function dashboardHandler(dashboard: Dashboard, options: DashboardHandlerOptions = {}): DashboardHandler {
  if (!(dashboard instanceof Recorder))
    throw new InvalidArgumentError('dashboard', dashboard, 'a dashboard from createDashboard()');
  const { token, localOnly } = validHandlerOptions(options);
  return async (request) => {
    const url = new URL(request.url, 'http://localhost');
    const route = url.pathname.replace(/\/+$/, '').split('/').pop();
    if (request.method !== 'GET' && request.method !== 'HEAD')
      return problem(405, 'Method Not Allowed', 'the dashboard takes GET', { Allow: 'GET, HEAD' });
    if (localOnly && !isLoopback(request.remoteAddress))
      return problem(
        403,
        'Forbidden',
        'the dashboard answers clients on this machine only (localOnly); give it a token to open it to others',
      );
    if (route !== 'data' && route !== 'key') return { status: 200, headers: PAGE_HEADERS, body: PAGE };
    if (token !== undefined && !sameToken(request.authorization ?? '', `Bearer ${token}`))
      return problem(401, 'Unauthorized', 'the dashboard needs its bearer token', { 'WWW-Authenticate': 'Bearer' });
    if (route === 'data') {
      const top = topOf(url.searchParams);
      if (top === undefined) return problem(400, 'Bad Request', `top must be a whole number from 1 to ${MOST_TOP}`);
      return json(200, dashboard.snapshot(top));
    }
    const key = url.searchParams.get('key') ?? '';
    if (key === '') return problem(400, 'Bad Request', 'key must be given: …/key?key=user:42');
    try {
      return json(200, await dashboard.lookup(key));
    } catch (error) {
      return problem(400, 'Bad Request', messageOf(error));
    }
  };
}
