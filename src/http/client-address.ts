import { isIPv4, isIPv6, SocketAddress } from 'node:net';
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
    throw new InvalidOptionError('trustedProxies', trustedProxies, `the number of proxies in front of this server, a whole number from 0 to ${MAX_TRUSTED_PROXIES}: this framework has no proxy setting of its own to defer to`);
  }
  const deferred = trustedProxies === 'framework';
  if (!deferred && (typeof trustedProxies !== 'number' || !Number.isInteger(trustedProxies) || trustedProxies < 0 || trustedProxies > MAX_TRUSTED_PROXIES)) {
    // `true` (trust every proxy) would let any client choose its own key by writing the header.
    const framework = proxySetting === undefined ? '' : `, or "framework" to defer to ${proxySetting}`;
    throw new InvalidOptionError('trustedProxies', trustedProxies, `the number of proxies in front of this server, a whole number from 0 to ${MAX_TRUSTED_PROXIES}${framework} (sluice never trusts every proxy: clients could forge their key)`);
  }
  if (proxyHeader !== 'x-forwarded-for' && proxyHeader !== 'forwarded') {
    throw new InvalidOptionError('proxyHeader', proxyHeader, '"x-forwarded-for" or "forwarded"');
  }
  if (typeof ipv6Subnet !== 'number' || !Number.isInteger(ipv6Subnet) || ipv6Subnet < 1 || ipv6Subnet > 128) {
    throw new InvalidOptionError('ipv6Subnet', ipv6Subnet, 'a prefix length from 1 to 128');
  }
  return { trustedProxies, proxyHeader, ipv6Subnet };
}

const IPV4_MAPPED = '::ffff:';

/**
 * An address as a proxy header or a socket may spell it, as a bare IP: brackets, ports and
 * IPv6 zones removed, IPv6 in one spelling, IPv4-mapped IPv6 in any spelling
 * (`::ffff:203.0.113.7`, `0:0:0:0:0:ffff:203.0.113.7`, `::ffff:cb00:7107`) turned into IPv4.
 * Undefined when it is no IP at all (`unknown`, an obfuscated `_hidden` identifier, garbage).
 */
export function parseAddress(raw: string): string | undefined {
  let address = raw.trim();
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(address);
  if (bracketed?.[1] !== undefined) address = bracketed[1];
  else if (/^[\d.]+:\d+$/.test(address)) address = address.slice(0, address.lastIndexOf(':'));
  address = address.replace(/%.*$/, '');
  if (isIPv4(address)) return address;
  if (!isIPv6(address)) return undefined;
  // node:net's own parser (inet_pton, then inet_ntop) writes every spelling of an address alike,
  // and an IPv4-mapped one as `::ffff:a.b.c.d`.
  const canonical = new SocketAddress({ address, family: 'ipv6' }).address;
  const mapped = canonical.slice(IPV4_MAPPED.length);
  return canonical.startsWith(IPV4_MAPPED) && isIPv4(mapped) ? mapped : canonical;
}

/**
 * `text` split at each `separator` outside RFC 9110 quoted strings (where `\"` is a quote). Read
 * from the right: what the trusted proxies appended is split right even when a client began the
 * header with a quote it never closed, which read from the left would swallow their hops.
 */
function splitUnquoted(text: string, separator: ',' | ';'): string[] {
  const parts: string[] = [];
  let end = text.length;
  let quoted = false;
  for (let i = text.length - 1; i >= 0; i--) {
    const char = text[i];
    if (char === separator && !quoted) {
      parts.unshift(text.slice(i + 1, end));
      end = i;
    } else if (char === '"') {
      let backslashes = 0;
      while (text[i - 1 - backslashes] === '\\') backslashes++;
      if (!quoted || backslashes % 2 === 0) quoted = !quoted;
    }
  }
  parts.unshift(text.slice(0, end));
  return parts;
}

/** A Forwarded parameter's value: a token, or a quoted string unquoted. */
function unquoted(value: string): string {
  const quoted = /^"(.*)"$/s.exec(value);
  return quoted?.[1] === undefined ? value : quoted[1].replace(/\\(.)/gs, '$1');
}

/** The addresses a header lists, leftmost (farthest from this server) first. */
function headerHops(header: ProxyHeader, value: string): string[] {
  if (header === 'x-forwarded-for') return value.split(',').map((element) => element.trim());
  // RFC 7239: `for=192.0.2.60;proto=http, for="[2001:db8::1]:4711"`; an element without `for` names no hop.
  return splitUnquoted(value, ',').map((element) => {
    const pair = splitUnquoted(element, ';').find((part) => /^\s*for\s*=/i.test(part));
    return pair === undefined ? '' : unquoted(pair.slice(pair.indexOf('=') + 1).trim());
  });
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
export function findClientAddress(config: ClientAddressConfig, socketAddress: string | undefined, headerValue: string | undefined, frameworkAddress?: string): ClientAddress {
  if (config.trustedProxies === 'framework') return { address: frameworkAddress === undefined ? undefined : parseAddress(frameworkAddress) };
  const socket = socketAddress === undefined ? undefined : parseAddress(socketAddress);
  if (config.trustedProxies === 0) {
    return headerValue === undefined ? { address: socket } : { address: socket, problem: 'proxy-header-ignored' };
  }
  const chain = [...(headerValue === undefined ? [] : headerHops(config.proxyHeader, headerValue)), socketAddress ?? ''];
  const index = chain.length - 1 - config.trustedProxies;
  // Too few hops: the leftmost is the best guess (the nearest proxy saw it), and it is reported.
  const hop = chain[Math.max(0, index)] ?? '';
  const address = parseAddress(hop);
  return index < 0 ? { address, problem: 'proxy-chain-short' } : { address };
}

/** Eight 16-bit groups of a valid IPv6 address (an IPv4 tail counts as the last two). */
function ipv6Groups(address: string): number[] {
  let text = address;
  const ipv4Tail = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (ipv4Tail) {
    const [a, b, c, d] = ipv4Tail.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, ipv4Tail.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((group) => parseInt(group, 16)));
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

/**
 * The rate-limit key of a client address: an IPv4 address as it is; an IPv6 address as its
 * `/subnet` prefix (`2001:db8:ab:cd00::/56`), so rotating through the addresses one client
 * owns does not earn new quota.
 */
export function addressKey(address: string, ipv6Subnet: number): string {
  if (isIPv4(address)) return address;
  const groups = ipv6Groups(address).map((group, i) => {
    const bitsKept = Math.min(16, Math.max(0, ipv6Subnet - i * 16));
    return bitsKept === 0 ? 0 : group & (0xffff << (16 - bitsKept)) & 0xffff;
  });
  while (groups.length > 0 && groups[groups.length - 1] === 0) groups.pop();
  const prefix = groups.map((group) => group.toString(16)).join(':');
  return `${prefix}${groups.length < 8 ? '::' : ''}/${ipv6Subnet}`;
}
