import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A certificate authority made at test time with `openssl`, and certificates it signs, as PEM files. */
export interface TestCa {
  readonly dir: string;
  /** The CA's certificate file. */
  readonly cert: string;
  /** A server certificate for 127.0.0.1 and localhost: its files. */
  server(name: string): Promise<KeyPair>;
  /** A client certificate: its files. */
  client(name: string): Promise<KeyPair>;
}

export interface KeyPair {
  readonly cert: string;
  readonly key: string;
  /** Both files' contents, for a client's credentials. */
  read(): Promise<{ cert: Buffer; key: Buffer }>;
}

const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** A CA named `name` in a temporary directory of `dir`'s choosing (one is made if not given). */
export async function makeCa(name: string, dir?: string): Promise<TestCa> {
  const at = dir ?? (await mkdtemp(join(tmpdir(), 'sluice-certs-')));
  const cert = join(at, `${name}.pem`);
  const key = join(at, `${name}-key.pem`);
  await run('openssl', [
    'req',
    '-x509',
    ...EC_KEY,
    '-keyout',
    key,
    '-out',
    cert,
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  const sign = async (leaf: string, extensions: string): Promise<KeyPair> => {
    const leafKey = join(at, `${leaf}-key.pem`);
    const leafCert = join(at, `${leaf}.pem`);
    const request = join(at, `${leaf}.csr`);
    const extfile = join(at, `${leaf}.ext`);
    await writeFile(extfile, extensions);
    await run('openssl', ['req', ...EC_KEY, '-keyout', leafKey, '-out', request, '-subj', `/CN=${leaf}`]);
    await run('openssl', [
      'x509',
      '-req',
      '-in',
      request,
      '-CA',
      cert,
      '-CAkey',
      key,
      '-CAcreateserial',
      '-out',
      leafCert,
      '-days',
      '2',
      '-extfile',
      extfile,
    ]);
    return {
      cert: leafCert,
      key: leafKey,
      read: async () => ({ cert: await readFile(leafCert), key: await readFile(leafKey) }),
    };
  };
  return {
    dir: at,
    cert,
    server: (leaf) => sign(leaf, 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n'),
    client: (leaf) => sign(leaf, 'extendedKeyUsage=clientAuth\n'),
  };
}

/** Removes a CA's directory and everything it signed. */
export const removeCa = (ca: TestCa) => rm(ca.dir, { recursive: true, force: true });
