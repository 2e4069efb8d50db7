import { InvalidOptionError } from '../core/errors.js';
import type { PolicyDecision } from '../core/types.js';
import type { HeaderFields } from '../http/headers.js';

/** Why a request was turned away. */
export interface Denial {
  /** 'limited': a policy's quota is spent. 'store-error': the store failed and the limiter's failure policy (`onStoreError`) denied. */
  readonly reason: 'limited' | 'store-error';
  /** The response's status: the `status` option's (429 by default), or 503 for a store error. */
  readonly status: number;
  /** The client's rate-limit key. */
  readonly key: string;
  /** Every policy with its decision; empty when the store failed. */
  readonly policies: readonly PolicyDecision[];
  /** The policies that denied the request. */
  readonly violated: readonly PolicyDecision[];
  /** Milliseconds until the request would be admitted (0 when the store failed: unknown). */
  readonly retryAfterMs: number;
  /** The store's failure, when `reason` is 'store-error'. */
  readonly error?: unknown;
}

/** What `respond` answers a denial with. */
export interface DenialResponse {
  /** From 400 to 599; default the denial's (the `status` option's, or 503 for a store error). */
  readonly status?: number;
  /** Sent besides (and over) the rate-limit fields and Retry-After; a `Content-Type` here is the body's. */
  readonly headers?: Readonly<Record<string, string>>;
  /** A string is sent as it is (text/plain unless `headers` say otherwise), anything else as JSON; none: an empty body. */
  readonly body?: unknown;
}

/** A denial's response as it is sent. */
export interface DenialContent {
  readonly status: number;
  readonly headers: HeaderFields;
  readonly contentType: string;
  readonly body: string;
}

/** A denial's body as sent: nothing (which JSON cannot spell) is an empty text body, as a string is. */
export function bodyOf(value: unknown): { contentType: string; body: string } {
  return typeof value === 'string' || value === undefined
    ? { contentType: 'text/plain; charset=utf-8', body: value ?? '' }
    : { contentType: 'application/json; charset=utf-8', body: JSON.stringify(value) };
}

/** An HTTP error status: a denial's. */
export const isStatus = (value: unknown): value is number =>
  typeof value === 'number' && Number.isInteger(value) && value >= 400 && value <= 599;

/** A denial as `respond` shaped it, over the rate-limit `headers`; what it returned is checked here, on the request. */
export function denialResponse(response: DenialResponse, status: number, headers: HeaderFields): DenialContent {
  const valid =
    typeof response === 'object' &&
    response !== null &&
    (response.status === undefined || isStatus(response.status)) &&
    (response.headers === undefined ||
      (typeof response.headers === 'object' &&
        response.headers !== null &&
        Object.values(response.headers).every((v) => typeof v === 'string')));
  if (!valid)
    throw new InvalidOptionError(
      'respond',
      response,
      'a function returning { status?: 400 to 599, headers?: { name: string value }, body? }',
    );
  const own = Object.entries(response.headers ?? {});
  const contentType = own.find(([name]) => name.toLowerCase() === 'content-type')?.[1];
  const content = bodyOf(response.body);
  return {
    status: response.status ?? status,
    headers: { ...headers, ...Object.fromEntries(own.filter(([name]) => name.toLowerCase() !== 'content-type')) },
    contentType: contentType ?? content.contentType,
    body: content.body,
  };
}
