import { readFileSync } from 'node:fs';
import path from 'node:path';

/** The files of a listener's TLS setting, as the config names them (relative to the config's folder). */
export interface TlsFileNames {
  key: string;
  cert: string;
  ca?: string | undefined;
}

/** What Node's `https.createServer` and `setSecureContext` take. */
export interface TlsFiles {
  key: Buffer;
  cert: Buffer;
  ca?: Buffer;
}

/** The key, certificate and CA of a listener's TLS setting, read from their files. */
export function readTlsFiles(tls: TlsFileNames, cwd: string): TlsFiles {
  const read = (file: string) => readFileSync(path.resolve(cwd, file));
  return { key: read(tls.key), cert: read(tls.cert), ...(tls.ca ? { ca: read(tls.ca) } : {}) };
}
