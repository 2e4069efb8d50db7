import { once } from 'node:events';
import { createConnection, createServer, type Socket } from 'node:net';

/** A TCP proxy in front of a server, whose link can be cut the way a network partition cuts it. */
export interface Proxy {
  readonly port: number;
  /** Stops carrying bytes either way, holding them; connections stay open, as across a partition. */
  partition(): void;
  /** Delivers, late, what was held, as TCP does once a partition heals, and carries bytes again. */
  heal(): void;
  close(): Promise<void>;
}

/** Starts a proxy on a free loopback port forwarding to `target`. */
export async function startProxy(target: { host: string; port: number }): Promise<Proxy> {
  const links = new Set<{ from: Socket; to: Socket; held: Buffer[] }>();
  let partitioned = false;
  const server = createServer((client) => {
    const upstream = createConnection(target);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      const link = { from, to, held: [] as Buffer[] };
      links.add(link);
      from.on('data', (chunk: Buffer) => (partitioned ? link.held.push(chunk) : to.write(chunk)));
      from.on('error', () => to.destroy());
      from.on('close', () => {
        links.delete(link);
        to.destroy();
      });
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the proxy has no port');
  return {
    port: address.port,
    partition() {
      partitioned = true;
    },
    heal() {
      partitioned = false;
      for (const link of links) for (const chunk of link.held.splice(0)) link.to.write(chunk);
    },
    async close() {
      for (const { from } of links) from.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}
