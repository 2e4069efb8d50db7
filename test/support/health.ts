import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';

const PROTO_PATH = fileURLToPath(new URL('./health.proto', import.meta.url));

interface HealthStub extends grpc.Client {
  Check(
    request: { service: string },
    callback: (error: grpc.ServiceError | null, response?: { status: string }) => void,
  ): void;
  Watch(request: { service: string }): grpc.ClientReadableStream<{ status: string }>;
}

/** A Watch call: the statuses received so far, and how the call ended. */
export interface Watching {
  readonly statuses: readonly string[];
  /** Resolves with the call's status once it ends (never rejects). */
  readonly ended: Promise<grpc.StatusObject>;
  cancel(): void;
}

/** A grpc.health.v1.Health client of 127.0.0.1:`port`, through @grpc/grpc-js; insecure unless `credentials` are given. */
export function healthClient(
  port: number,
  credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure(),
): {
  check(service: string): Promise<string>;
  watch(service: string): Watching;
  close(): void;
} {
  const definition = loadSync(PROTO_PATH, { enums: String, defaults: true });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } };
  };
  const client = new loaded.grpc.health.v1.Health(`127.0.0.1:${port}`, credentials) as unknown as HealthStub;
  return {
    check: (service) =>
      new Promise((resolve, reject) =>
        client.Check({ service }, (error, response) => (error ? reject(error) : resolve(response?.status ?? ''))),
      ),
    watch(service) {
      const call = client.Watch({ service });
      const statuses: string[] = [];
      call.on('data', (response: { status: string }) => statuses.push(response.status));
      // A call that ends in an error emits 'error' and then 'status'; the status says it all.
      call.on('error', () => undefined);
      const ended = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
      return { statuses, ended, cancel: () => call.cancel() };
    },
    close: () => client.close(),
  };
}
