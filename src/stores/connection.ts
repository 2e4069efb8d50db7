import { StoreError, messageOf } from '../core/errors.js';

/** An ioredis or iovalkey client (`Redis` or `Cluster`), as far as its connection goes. */
interface ConnectionEvents {
  /** 'ready' while connected and ready for commands. */
  readonly status: string;
  on(event: 'error' | 'ready', listener: (error?: unknown) => void): unknown;
}

/** What a client has said about its connection since it was last ready. */
export interface ConnectionWatch {
  /** Why the client cannot reach its server now, as its last error said; undefined while it can. */
  readonly failure: () => StoreError | undefined;
  /** A call's failure while the client cannot reach its server: its error, and why; else undefined. */
  readonly explain: (error: unknown) => StoreError | undefined;
}

const watches = new WeakMap<object, ConnectionWatch>();

/** A connection error in words: "connection refused by host:port" where it was refused. */
function inWords(error: unknown): string {
  // A Cluster that reached no node holds the last node's error.
  const { code, address, port, lastNodeError } = error as Record<string, unknown>;
  if (lastNodeError instanceof Error) return inWords(lastNodeError);
  if (code !== 'ECONNREFUSED') return `connection failed: ${messageOf(error)}`;
  return typeof address === 'string' ? `connection refused by ${address}:${String(port)}` : 'connection refused';
}

/**
 * Watches the connection of an ioredis or iovalkey client, which while disconnected queues a
 * command until the client reconnects, or gives up on it with an error that does not say why: the
 * why comes only as an `error` event. Undefined for other clients. One listener per client, however
 * many stores share it; listening also keeps ioredis from printing every failed reconnection
 * ("[ioredis] Unhandled error event"): the limiter reports an outage once, naming this cause.
 */
export function watchConnection(client: unknown): ConnectionWatch | undefined {
  const events = client as ConnectionEvents;
  if (typeof events.on !== 'function' || typeof events.status !== 'string') return undefined;
  let watch = watches.get(events);
  if (watch) return watch;
  let last: unknown;
  events.on('error', (error) => (last = error));
  events.on('ready', () => (last = undefined));
  const down = () => (last === undefined || events.status === 'ready' ? undefined : last);
  watch = {
    failure: () => {
      const error = down();
      return error === undefined ? undefined : new StoreError(inWords(error), { cause: error });
    },
    explain: (error) => {
      const cause = down();
      return cause === undefined
        ? undefined
        : new StoreError(`${messageOf(error)} (${inWords(cause)})`, { cause: error });
    },
  };
  watches.set(events, watch);
  return watch;
}
