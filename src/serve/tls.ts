import { readFile } from 'node:fs/promises';
import { createSecureContext, type SecureContextOptions, type TlsOptions as ServerTlsOptions } from 'node:tls';
import { InvalidOptionError, messageOf } from '../core/errors.js';
import { nestedOptions } from '../core/validate.js';

/** TLS on both ports, from PEM files that are read again on reload. */
export interface TlsOptions {
  /** The server's certificate chain, PEM. */
  cert: string;
  /** Its private key, PEM. */
  key: string;
  /** With it, every client must present a certificate this CA (PEM; a bundle) signed: mutual TLS. */
  clientCa?: string;
}

const TLS_OPTIONS = ['cert', 'key', 'clientCa'];

function path(option: string, value: unknown, expected: string): string {
  if (typeof value !== 'string' || value === '') throw new InvalidOptionError(option, value, expected);
  return value;
}

/** `tls` checked: cert and key both, clientCa optional, nothing else. */
export function tlsOptions(value: unknown): TlsOptions | undefined {
  if (value === undefined) return undefined;
  const o = nestedOptions('tls', value, TLS_OPTIONS);
  const cert = path('tls.cert', o.cert, 'the path of a PEM certificate file (tls.cert and tls.key go together)');
  const key = path('tls.key', o.key, 'the path of a PEM private key file (tls.cert and tls.key go together)');
  if (o.clientCa === undefined) return { cert, key };
  return { cert, key, clientCa: path('tls.clientCa', o.clientCa, 'the path of a PEM CA certificate file') };
}

async function pem(option: string, file: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (error) {
    throw new InvalidOptionError(option, file, 'a readable PEM file', `option "${option}": ${messageOf(error)}`);
  }
}

/** The files read, and checked together (the key must be the certificate's), as a secure context takes them. */
async function contextOf(tls: TlsOptions): Promise<SecureContextOptions> {
  const context: SecureContextOptions = { cert: await pem('tls.cert', tls.cert), key: await pem('tls.key', tls.key) };
  if (tls.clientCa !== undefined) context.ca = await pem('tls.clientCa', tls.clientCa);
  try {
    createSecureContext(context);
  } catch (error) {
    throw new InvalidOptionError(
      'tls',
      tls,
      'a certificate, its key and a CA that TLS accepts',
      `option "tls": ${messageOf(error)} (${tls.cert}, ${tls.key}${tls.clientCa ? `, ${tls.clientCa}` : ''})`,
    );
  }
  return context;
}

/** A server whose certificates can be replaced while its connections go on (tls.Server and its kin). */
export interface SecureServer {
  setSecureContext(options: SecureContextOptions): void;
}

/** The certificates both ports serve, read again by reload(). */
export class Certificates {
  private readonly servers: SecureServer[] = [];

  private constructor(
    private readonly tls: TlsOptions,
    private context: SecureContextOptions,
  ) {}

  /** Reads the files; rejects with InvalidOptionError naming the one that is missing or bad. */
  static async read(tls: TlsOptions): Promise<Certificates> {
    return new Certificates(tls, await contextOf(tls));
  }

  /** What a server is created with: the certificates, and with a client CA, every client's certificate verified. */
  serverOptions(): ServerTlsOptions {
    return this.tls.clientCa === undefined
      ? { ...this.context }
      : { ...this.context, requestCert: true, rejectUnauthorized: true };
  }

  /** A server to give the certificates of the next reload. */
  serve(server: SecureServer): void {
    this.servers.push(server);
  }

  /**
   * Reads the files again; new connections get them, open ones keep theirs. A file missing or bad
   * keeps the certificates in use, and rejects saying why.
   */
  async reload(): Promise<void> {
    const context = await contextOf(this.tls);
    for (const server of this.servers) server.setSecureContext(context);
    this.context = context;
  }
}
