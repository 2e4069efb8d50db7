import { once } from 'node:events';
import { createConnection, createServer, type Socket } from 'node:net';

/** A TCP proxy on a free loopback port in front of one server, able to cut it off as a network partition would. */
export interface Proxy {
  readonly port: number;
  /**
   * Stops forwarding in both directions while keeping every connection open and accepting new
   * ones: bytes wait in the sockets' buffers, as they wait in TCP's during a partition, and are
   * delivered on heal. (Dropping them would desynchronise the protocol: a client would match
   * later replies to earlier commands.)
   */
  blackHole(): void;
  heal(): void;
  stop(): Promise<void>;
}

/** Starts a proxy to 127.0.0.1:`targetPort`. A connection whose server is down is closed at once. */
export async function startProxy(targetPort: number): Promise<Proxy> {
  const links = new Set<{ client: Socket; server: Socket }>();
  let holding = false;

  function forward(link: { client: Socket; server: Socket }): void {
    link.client.pipe(link.server);
    link.server.pipe(link.client);
  }
  function hold({ client, server }: { client: Socket; server: Socket }): void {
    for (const [from, to] of [
      [client, server],
      [server, client],
    ] as const) {
      from.unpipe(to);
      from.pause();
    }
  }

  const proxy = createServer((client) => {
    const link = { client, server: createConnection({ host: '127.0.0.1', port: targetPort }) };
    links.add(link);
    const close = () => {
      links.delete(link);
      link.client.destroy();
      link.server.destroy();
    };
    for (const socket of [link.client, link.server]) {
      socket.on('error', close);
      socket.on('close', close);
    }
    if (!holding) forward(link);
  });
  proxy.listen(0, '127.0.0.1');
  await once(proxy, 'listening');
  const address = proxy.address();
  if (typeof address !== 'object' || address === null) throw new Error('the proxy has no port');

  return {
    port: address.port,
    blackHole() {
      holding = true;
      links.forEach(hold);
    },
    heal() {
      if (!holding) return;
      holding = false;
      links.forEach(forward);
    },
    async stop() {
      const closed = new Promise((resolve) => proxy.close(resolve));
      for (const { client, server } of links) {
        client.destroy();
        server.destroy();
      }
      await closed;
    },
  };
}
