import { InvalidOptionError } from '../core/errors.js';

/** The proxy header that the trusted proxies append the client's address to. */
export type ProxyHeader = 'x-forwarded-for' | 'forwarded';

export interface ClientAddressOptions {
  /**
   * How many reverse proxies (load balancers, CDNs) stand between the clients and this server,
   * each appending the address it saw to `proxyHeader`. Default 0: the socket's address is the
   * client, and proxy headers, which any client can write, are ignored. 'framework': the address
   * the framework found by its own proxy setting (Express `trust proxy`, Fastify `trustProxy`, Koa
   * `app.proxy`), for an app that already configures it; not on node:http and Hono, which have none.
   */
  trustedProxies?: number | 'framework';
  /** Which header the trusted proxies write (default 'x-forwarded-for'); the other one is ignored. */
  proxyHeader?: ProxyHeader;
  /** IPv6 clients are keyed by this prefix length (default 56), since one client usually holds a whole /64 or more. */
  ipv6Subnet?: number;
}

export interface ClientAddressConfig {
  readonly trustedProxies: number | 'framework';
  readonly proxyHeader: ProxyHeader;
  readonly ipv6Subnet: number;
}

// More proxies than this in front of one server is a mistake, not a deployment.
const MAX_TRUSTED_PROXIES = 10;

/**
 * The client-address options, checked. `proxySetting` names the framework's own proxy setting
 * (e.g. "Express's `trust proxy`"), when it has one that `trustedProxies: 'framework'` may defer to.
 */
export function clientAddressConfig(options: ClientAddressOptions, proxySetting?: string): ClientAddressConfig {
  const { trustedProxies = 0, proxyHeader = 'x-forwarded-for', ipv6Subnet = 56 } = options;
  if (trustedProxies === 'framework' && proxySetting === undefined) {
    throw new InvalidOptionError(
      'trustedProxies',
      trustedProxies,
      `the number of proxies in front of this server, a whole number from 0 to ${MAX_TRUSTED_PROXIES}: this framework has no proxy setting of its own to defer to`,
    );
  }
  const deferred = trustedProxies === 'framework';
  if (
    !deferred &&
    (typeof trustedProxies !== 'number' ||
      !Number.isInteger(trustedProxies) ||
      trustedProxies < 0 ||
      trustedProxies > MAX_TRUSTED_PROXIES)
  ) {
    // `true` (trust every proxy) would let any client choose its own key by writing the header.
    const framework = proxySetting === undefined ? '' : `, or "framework" to defer to ${proxySetting}`;
    throw new InvalidOptionError(
      'trustedProxies',
      trustedProxies,
      `the number of proxies in front of this server, a whole number from 0 to ${MAX_TRUSTED_PROXIES}${framework} (sluice never trusts every proxy: clients could forge their key)`,
    );
  }
  if (proxyHeader !== 'x-forwarded-for' && proxyHeader !== 'forwarded') {
    throw new InvalidOptionError('proxyHeader', proxyHeader, '"x-forwarded-for" or "forwarded"');
  }
  if (typeof ipv6Subnet !== 'number' || !Number.isInteger(ipv6Subnet) || ipv6Subnet < 1 || ipv6Subnet > 128) {
    throw new InvalidOptionError('ipv6Subnet', ipv6Subnet, 'a prefix length from 1 to 128');
  }
  return { trustedProxies, proxyHeader, ipv6Subnet };
}

// A dotted quad, each part a decimal from 0 to 255 without leading zeros (as node:net's isIPv4).
const IPV4 = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;
const HEX_GROUP = /^[0-9a-f]{1,4}$/i;

/** An IPv4 address's two 16-bit halves. */
function ipv4Words(address: string): [number, number] {
  const [a, b, c, d] = address.split('.').map(Number) as [number, number, number, number];
  return [(a << 8) | b, (c << 8) | d];
}

const dotted = (high: number, low: number): string => `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;

/** `:`-separated groups as 16-bit words; a last group may be a dotted IPv4 tail. Undefined if any is neither. */
function groupWords(text: string, tailMayBeIPv4: boolean): number[] | undefined {
  if (text === '') return [];
  const groups = text.split(':');
  const words: number[] = [];
  for (const [i, group] of groups.entries()) {
    if (tailMayBeIPv4 && i === groups.length - 1 && IPV4.test(group)) words.push(...ipv4Words(group));
    else if (HEX_GROUP.test(group)) words.push(parseInt(group, 16));
    else return undefined;
  }
  return words;
}

/**
 * The eight 16-bit words of an IPv6 address in any RFC 4291 spelling (upper or lower case, leading
 * zeros, one `::` standing for one or more zero groups, a dotted IPv4 tail); undefined if it is none.
 */
function ipv6Words(address: string): number[] | undefined {
  const halves = address.split('::');
  if (halves.length > 2) return undefined;
  const head = groupWords(halves[0] ?? '', halves.length === 1);
  const tail = halves.length === 2 ? groupWords(halves[1] ?? '', true) : [];
  if (head === undefined || tail === undefined) return undefined;
  if (halves.length === 1) return head.length === 8 ? head : undefined;
  const zeros = 8 - head.length - tail.length;
  return zeros < 1 ? undefined : [...head, ...new Array<number>(zeros).fill(0), ...tail];
}

/**
 * An IPv6 address in one spelling, as inet_ntop writes it (RFC 5952): lowercase hex without leading
 * zeros, the longest run of two or more zero words (the first of equals) as `::`, and an
 * IPv4-compatible address (`::a.b.c.d`, six zero words) with its IPv4 tail dotted.
 */
function ipv6Text(words: readonly number[]): string {
  let run = { at: -1, length: 1 };
  for (let at = 0; at < 8; at++) {
    let end = at;
    while (words[end] === 0) end++;
    if (end - at > run.length) run = { at, length: end - at };
  }
  const hex = (from: number, to: number) =>
    words
      .slice(from, to)
      .map((word) => word.toString(16))
      .join(':');
  if (run.at === -1) return hex(0, 8);
  if (run.at === 0 && run.length === 6) return `::${dotted(words[6]!, words[7]!)}`;
  return `${hex(0, run.at)}::${hex(run.at + run.length, 8)}`;
}

// How node:net spells an IPv4 client of a dual-stack socket: `::ffff:203.0.113.7`.
const MAPPED_PREFIX = '::ffff:';

/**
 * An address as a proxy header or a socket may spell it, as a bare IP: brackets, ports and
 * IPv6 zones removed, IPv6 in one spelling, IPv4-mapped IPv6 in any spelling
 * (`::ffff:203.0.113.7`, `0:0:0:0:0:ffff:203.0.113.7`, `::ffff:cb00:7107`) turned into IPv4.
 * Undefined when it is no IP at all (`unknown`, an obfuscated `_hidden` identifier, garbage).
 */
export function parseAddress(raw: string): string | undefined {
  let address = raw.trim();
  // The usual spellings first, which the steps below would leave as they are: a bare IPv4 address,
  // and the IPv4-mapped one a dual-stack socket reports for an IPv4 client.
  if (IPV4.test(address)) return address;
  if (address.startsWith(MAPPED_PREFIX) && IPV4.test(address.slice(MAPPED_PREFIX.length)))
    return address.slice(MAPPED_PREFIX.length);
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(address);
  if (bracketed?.[1] !== undefined) address = bracketed[1];
  else if (/^[\d.]+:\d+$/.test(address)) address = address.slice(0, address.lastIndexOf(':'));
  address = address.replace(/%.*$/, '');
  if (IPV4.test(address)) return address;
  const words = ipv6Words(address);
  if (words === undefined) return undefined;
  // IPv4-mapped (::ffff:0:0/96): the IPv4 client a dual-stack socket reports this way.
  const mapped = words.slice(0, 5).every((word) => word === 0) && words[5] === 0xffff;
  return mapped ? dotted(words[6]!, words[7]!) : ipv6Text(words);
}

/**
 * `text` split at each `separator` outside RFC 9110 quoted strings (where `\"` is a quote): its
 * rightmost `limit` parts, leftmost first. Read from the right: what the trusted proxies appended is
 * split right even when a client began the header with a quote it never closed, which read from
 * the left would swallow their hops; and what a client padded the left with is never read.
 */
function splitUnquoted(text: string, separator: ',' | ';', limit = Infinity): string[] {
  const parts: string[] = [];
  let end = text.length;
  let quoted = false;
  for (let i = text.length - 1; i >= 0 && parts.length < limit; i--) {
    const char = text[i];
    if (char === separator && !quoted) {
      parts.push(text.slice(i + 1, end));
      end = i;
    } else if (char === '"') {
      let backslashes = 0;
      while (text[i - 1 - backslashes] === '\\') backslashes++;
      if (!quoted || backslashes % 2 === 0) quoted = !quoted;
    }
  }
  if (parts.length < limit) parts.push(text.slice(0, end));
  return parts.reverse();
}

/** A Forwarded parameter's value: a token, or a quoted string unquoted. */
function unquoted(value: string): string {
  const quoted = /^"(.*)"$/s.exec(value);
  return quoted?.[1] === undefined ? value : quoted[1].replace(/\\(.)/gs, '$1');
}

/** The addresses a header lists, leftmost (farthest from this server) first: the rightmost `limit` of them. */
function headerHops(header: ProxyHeader, value: string, limit: number): string[] {
  if (header === 'x-forwarded-for') return value.split(',').map((element) => element.trim());
  // RFC 7239: `for=192.0.2.60;proto=http, for="[2001:db8::1]:4711"`; an element without `for` names no hop.
  return splitUnquoted(value, ',', limit).map((element) => {
    const pair = splitUnquoted(element, ';').find((part) => /^\s*for\s*=/i.test(part));
    return pair === undefined ? '' : unquoted(pair.slice(pair.indexOf('=') + 1).trim());
  });
}

/**
 * The `n`th element from the right of an X-Forwarded-For list (n from 1), untrimmed, or undefined
 * when the list has fewer: what splitting it at every comma would give, without the split.
 */
function forwardedForHop(value: string, n: number): string | undefined {
  let end = value.length;
  for (let hop = 1; hop < n; hop++) {
    end = end === 0 ? -1 : value.lastIndexOf(',', end - 1);
    if (end === -1) return undefined;
  }
  const start = end === 0 ? 0 : value.lastIndexOf(',', end - 1) + 1;
  return value.slice(start, end);
}

export type AddressProblem =
  /** A proxy header arrived but no proxy is declared: behind a proxy, every client would share one key. */
  | 'proxy-header-ignored'
  /** The request passed fewer proxies than declared: it bypassed one, or trustedProxies is too high. */
  | 'proxy-chain-short';

export interface ClientAddress {
  /** The client's IP, or undefined when none is known. */
  readonly address: string | undefined;
  readonly problem?: AddressProblem;
}

/**
 * The client's address: `trustedProxies` hops from the right of the chain formed by the proxy
 * header's addresses followed by the socket's. Everything left of that hop was written by the
 * client or by proxies nobody vouches for, so it is never read. With `trustedProxies: 'framework'`,
 * `frameworkAddress`, the one its own proxy setting chose.
 */
export function findClientAddress(
  config: ClientAddressConfig,
  socketAddress: string | undefined,
  headerValue: string | undefined,
  frameworkAddress?: string,
): ClientAddress {
  if (config.trustedProxies === 'framework')
    return { address: frameworkAddress === undefined ? undefined : parseAddress(frameworkAddress) };
  const socket = socketAddress === undefined ? undefined : parseAddress(socketAddress);
  if (config.trustedProxies === 0) {
    return headerValue === undefined ? { address: socket } : { address: socket, problem: 'proxy-header-ignored' };
  }
  if (headerValue !== undefined && config.proxyHeader === 'x-forwarded-for') {
    const hop = forwardedForHop(headerValue, config.trustedProxies);
    if (hop !== undefined) return { address: parseAddress(hop) };
  }
  const chain = [
    // Only the trusted hops are ever read: the one wanted is the leftmost of them.
    ...(headerValue === undefined ? [] : headerHops(config.proxyHeader, headerValue, config.trustedProxies)),
    socketAddress ?? '',
  ];
  const index = chain.length - 1 - config.trustedProxies;
  // Too few hops: the leftmost is the best guess (the nearest proxy saw it), and it is reported.
  const hop = chain[Math.max(0, index)] ?? '';
  const address = parseAddress(hop);
  return index < 0 ? { address, problem: 'proxy-chain-short' } : { address };
}

/**
 * The rate-limit key of a client address: an IPv4 address as it is; an IPv6 address as its
 * `/subnet` prefix (`2001:db8:ab:cd00::/56`), so rotating through the addresses one client
 * owns does not earn new quota.
 */
export function addressKey(address: string, ipv6Subnet: number): string {
  if (IPV4.test(address)) return address;
  const groups = (ipv6Words(address) ?? []).map((group, i) => {
    const bitsKept = Math.min(16, Math.max(0, ipv6Subnet - i * 16));
    return bitsKept === 0 ? 0 : group & (0xffff << (16 - bitsKept)) & 0xffff;
  });
  while (groups.length > 0 && groups[groups.length - 1] === 0) groups.pop();
  const prefix = groups.map((group) => group.toString(16)).join(':');
  return `${prefix}${groups.length < 8 ? '::' : ''}/${ipv6Subnet}`;
}
