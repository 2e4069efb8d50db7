import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';

/** The .proto sluice serve speaks, which its users' clients load. */
const PROTO_PATH = fileURLToPath(new URL('../../src/serve/proto/ratelimit.proto', import.meta.url));

/** RateLimitService for a @grpc/grpc-js client or server: fields in camelCase, enums by name, 64-bit integers as numbers. */
export function rateLimitService(): grpc.ServiceClientConstructor {
  const definition = loadSync(PROTO_PATH, {
    keepCase: false,
    longs: Number,
    enums: String,
    defaults: false,
    oneofs: true,
  });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    envoy: { service: { ratelimit: { v3: { RateLimitService: grpc.ServiceClientConstructor } } } };
  };
  return loaded.envoy.service.ratelimit.v3.RateLimitService;
}

/** A RateLimitResponse as @grpc/proto-loader decodes it (camelCase, enums by name). */
export interface WireResponse {
  overallCode: string;
  statuses: {
    code: string;
    currentLimit?: { requestsPerUnit: number; unit: string; name?: string };
    limitRemaining?: number;
    durationUntilReset?: { seconds: number; nanos: number };
  }[];
  responseHeadersToAdd?: { key: string; value: string }[];
}

export interface RlsClient {
  shouldRateLimit(request: object): Promise<WireResponse>;
  close(): void;
}

/**
 * A gRPC client of envoy.service.ratelimit.v3.RateLimitService on 127.0.0.1:`port`; insecure
 * unless `credentials` are given. `options` are the channel's (such as a connection of its own).
 */
export function rlsClient(
  port: number,
  credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure(),
  options: grpc.ChannelOptions = {},
): RlsClient {
  const Client = rateLimitService();
  const client = new Client(`127.0.0.1:${port}`, credentials, options) as unknown as grpc.Client & {
    ShouldRateLimit(request: object, callback: (error: grpc.ServiceError | null, response: WireResponse) => void): void;
  };
  return {
    shouldRateLimit: (request) =>
      new Promise((resolve, reject) =>
        client.ShouldRateLimit(request, (error, response) => (error ? reject(error) : resolve(response))),
      ),
    close: () => client.close(),
  };
}

/** A descriptor of `key=value` pairs, as Envoy sends it. */
export function descriptor(...pairs: [string, string][]): { entries: { key: string; value: string }[] } {
  return { entries: pairs.map(([key, value]) => ({ key, value })) };
}

/**
 * A temporary directory holding `files` (name to text); removed by the returned function. `write`
 * replaces a file whole, as a ConfigMap update does: a watcher never reads it half written.
 */
export async function configDir(
  files: Record<string, string>,
): Promise<{ dir: string; write(name: string, text: string): Promise<void>; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-serve-'));
  const write = async (name: string, text: string) => {
    // A hidden name, which the service does not read as config.
    const draft = join(dir, `.${name}.draft`);
    await writeFile(draft, text);
    await rename(draft, join(dir, name));
  };
  await Promise.all(Object.entries(files).map(([name, text]) => write(name, text)));
  return { dir, write, remove: () => rm(dir, { recursive: true, force: true }) };
}

/** Runs `test` on a temporary directory holding `yaml` as rules.yaml (`write` replaces it), then removes it. */
export async function withConfig<T>(
  yaml: string,
  test: (dir: string, write: (text: string) => Promise<void>) => Promise<T>,
): Promise<T> {
  const config = await configDir({ 'rules.yaml': yaml });
  try {
    return await test(config.dir, (text) => config.write('rules.yaml', text));
  } finally {
    await config.remove();
  }
}

/** Reads a protobuf message into its fields by number: varints as numbers, length-delimited and 64-bit ones as bytes. */
export function protoFields(bytes: Buffer): Map<number, (number | Buffer)[]> {
  const fields = new Map<number, (number | Buffer)[]>();
  let at = 0;
  const varint = () => {
    let value = 0;
    for (let shift = 0; ; shift += 7) {
      const byte = bytes[at++] ?? assert.fail('truncated varint');
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
  };
  while (at < bytes.length) {
    const tag = varint();
    const [field, wireType] = [Math.floor(tag / 8), tag % 8];
    let value: number | Buffer;
    if (wireType === 0) value = varint();
    else if (wireType === 1) value = bytes.subarray(at, (at += 8));
    else if (wireType === 2) {
      const length = varint();
      value = bytes.subarray(at, (at += length));
    } else assert.fail(`unexpected wire type ${wireType}`);
    fields.set(field, [...(fields.get(field) ?? []), value]);
  }
  return fields;
}
