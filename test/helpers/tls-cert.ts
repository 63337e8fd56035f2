import { X509Certificate } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import selfsigned from 'selfsigned';

export interface TestCertificate {
  dir: string;
  keyFile: string;
  certFile: string;
  /** The certificate PEM, for clients to trust. */
  cert: string;
}

/** A fresh self-signed certificate for localhost and 127.0.0.1, written to a temporary folder. */
export async function createTestCertificate(): Promise<TestCertificate> {
  const pems = await selfsigned.generate([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
        ],
      },
    ],
  });
  const dir = mkdtempSync(path.join(tmpdir(), 'quotagate-tls-'));
  const keyFile = path.join(dir, 'key.pem');
  const certFile = path.join(dir, 'cert.pem');
  writeFileSync(keyFile, pems.private, { mode: 0o600 });
  writeFileSync(certFile, pems.cert);
  return { dir, keyFile, certFile, cert: pems.cert };
}

/** The SHA-256 fingerprint of a certificate PEM. */
export const fingerprintOf = (pem: string) => new X509Certificate(pem).fingerprint256;

/** The SHA-256 fingerprint of the certificate a TLS listener on 127.0.0.1 serves a new connection. */
export function servedFingerprint(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      resolve(socket.getPeerX509Certificate()!.fingerprint256);
      socket.end();
    });
    socket.on('error', reject);
  });
}

/**
 * GETs `path` over HTTPS from a listener on 127.0.0.1, trusting only `ca` (as `curl --cacert` does) and
 * checking the certificate names `servername` (default: 127.0.0.1).
 */
export function httpsGet(
  port: number | undefined,
  path: string,
  options: { ca: string | Buffer; headers?: Record<string, string>; servername?: string },
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    https
      .get(
        {
          host: '127.0.0.1',
          port,
          path,
          ca: options.ca,
          headers: options.headers,
          ...(options.servername ? { servername: options.servername } : {}),
        },
        (res) => {
          let body = '';
          res.on('data', (chunk) => (body += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      )
      .on('error', reject);
  });
}
