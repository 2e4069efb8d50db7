import { GrpcError, MESSAGE_START, Status, type Method, type ServerStream } from './grpc.js';
import { decodeHealthCheckRequest } from './protobuf.js';
import { encodeHealthCheckResponse, type ServingStatus } from './protobuf-writer.js';

/** The rate limit service's full name, as gRPC routes it and as health checks name it. */
export const RATE_LIMIT_SERVICE = 'envoy.service.ratelimit.v3.RateLimitService';

/**
 * The names grpc.health.v1.Health answers for: the whole server (''), the rate limit service, and
 * 'ratelimit', the name envoyproxy/ratelimit gives it (so its probes keep working).
 */
const SERVICES: ReadonlySet<string> = new Set(['', RATE_LIMIT_SERVICE, 'ratelimit']);
/** How often a watched service's store is asked, while anyone watches. */
const WATCH_EVERY_MS = 1000;

const ANSWERS: Readonly<Record<ServingStatus, Buffer>> = {
  UNKNOWN: encodeHealthCheckResponse('UNKNOWN'),
  SERVING: encodeHealthCheckResponse('SERVING'),
  NOT_SERVING: encodeHealthCheckResponse('NOT_SERVING'),
  SERVICE_UNKNOWN: encodeHealthCheckResponse('SERVICE_UNKNOWN'),
};

interface Watcher {
  readonly call: ServerStream;
  readonly known: boolean;
  sent?: ServingStatus;
}

/**
 * Whether the service serves, for grpc.health.v1.Health and GET /healthcheck alike: not while it
 * stops (from SIGTERM or close() on), nor while its store fails and it denies then. `storeFailing`
 * asks the store now and answers why it cannot decide, or undefined.
 */
export class Health {
  private stopping = false;
  private serving = true;
  private readonly watchers = new Set<Watcher>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private asking: Promise<string | undefined> | undefined;

  constructor(private readonly storeFailing: () => Promise<string | undefined>) {}

  /** Why the service does not serve now (asking the store), or undefined while it serves. */
  async check(): Promise<string | undefined> {
    const reason = this.stopping ? 'the service is stopping' : await this.storeFailing();
    this.set(reason === undefined && !this.stopping);
    return this.stopping ? 'the service is stopping' : reason;
  }

  /** From now on, NOT_SERVING: watchers are told, then their calls end (UNAVAILABLE). */
  stop(): void {
    this.stopping = true;
    clearInterval(this.timer);
    this.set(false);
    for (const watcher of this.watchers) watcher.call.end(Status.UNAVAILABLE, 'the service is stopping');
    this.watchers.clear();
  }

  private set(serving: boolean): void {
    this.serving = serving;
    for (const watcher of this.watchers) this.tell(watcher);
  }

  private tell(watcher: Watcher): void {
    const status = !watcher.known ? 'SERVICE_UNKNOWN' : this.serving ? 'SERVING' : 'NOT_SERVING';
    if (watcher.sent === status) return;
    watcher.sent = status;
    watcher.call.write(ANSWERS[status]);
  }

  /** One question to the store at a time, whoever asks. */
  private ask(): Promise<string | undefined> {
    this.asking ??= this.check().finally(() => (this.asking = undefined));
    return this.asking;
  }

  private watch(service: string, call: ServerStream): void {
    if (this.stopping) return call.end(Status.UNAVAILABLE, 'the service is stopping');
    const watcher: Watcher = { call, known: SERVICES.has(service) };
    this.watchers.add(watcher);
    call.onEnd(() => {
      this.watchers.delete(watcher);
      if (this.watchers.size > 0) return;
      clearInterval(this.timer);
      this.timer = undefined;
    });
    if (!watcher.known) return this.tell(watcher);
    // The first answer is the store's now; then one question a while, for every watcher.
    void this.ask().then(() => this.tell(watcher));
    this.timer ??= setInterval(() => void this.ask(), WATCH_EVERY_MS);
  }

  /** grpc.health.v1.Health's methods, by path. */
  methods(): [string, Method][] {
    return [
      [
        '/grpc.health.v1.Health/Check',
        {
          kind: 'unary',
          answer: (request, _deadline, reply) => {
            const service = decodeHealthCheckRequest(request, MESSAGE_START);
            if (!SERVICES.has(service)) throw new GrpcError(Status.NOT_FOUND, 'unknown service');
            void this.ask().then(
              (unhealthy) => reply.answer(ANSWERS[unhealthy === undefined ? 'SERVING' : 'NOT_SERVING']),
              (error: unknown) => reply.failWith(error),
            );
          },
        },
      ],
      [
        '/grpc.health.v1.Health/Watch',
        { kind: 'server-streaming', start: (request, call) => this.watch(decodeHealthCheckRequest(request), call) },
      ],
    ];
  }
}
