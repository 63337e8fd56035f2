import { isIP } from 'node:net';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import selfsigned from 'selfsigned';

/** A certificate and its key, as PEM text and as the files that hold them. */
export interface IssuedCertificate {
  cert: string;
  key: string;
  certFile: string;
  keyFile: string;
}

/** A private CA: its certificate (what an upstream's `tls.ca` names) and what it signs. */
export interface PrivateCa {
  /** The CA's certificate (PEM), and the file that holds it. */
  cert: string;
  certFile: string;
  /**
   * A certificate this CA signs for `names` (DNS names and IP addresses; the first is its common
   * name), written in the CA's folder as `<label>-cert.pem` and `<label>-key.pem`.
   */
  issue(label: string, names: readonly string[]): Promise<IssuedCertificate>;
}

/**
 * A CA of its own, as a company's internal CA that no system trusts, its files written in `dir`
 * (selfsigned signs with a CA's key since 5.x: no openssl needed).
 */
export async function createPrivateCa(dir: string, label: string): Promise<PrivateCa> {
  const ca = await selfsigned.generate([{ name: 'commonName', value: `${label} test CA` }], {
    keyType: 'ec',
    algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    ],
  });
  const certFile = path.join(dir, `${label}-ca.pem`);
  writeFileSync(certFile, ca.cert);
  return {
    cert: ca.cert,
    certFile,
    async issue(leaf, names) {
      const pems = await selfsigned.generate([{ name: 'commonName', value: names[0] ?? leaf }], {
        keyType: 'ec',
        algorithm: 'sha256',
        ca: { key: ca.private, cert: ca.cert },
        extensions: [
          { name: 'basicConstraints', cA: false },
          { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
          { name: 'extKeyUsage', serverAuth: true, clientAuth: true },
          {
            name: 'subjectAltName',
            altNames: names.map((value) => (isIP(value) ? { type: 7, ip: value } : { type: 2, value })),
          },
        ],
      });
      const issued = {
        cert: pems.cert,
        key: pems.private,
        certFile: path.join(dir, `${leaf}-cert.pem`),
        keyFile: path.join(dir, `${leaf}-key.pem`),
      };
      writeFileSync(issued.certFile, issued.cert);
      writeFileSync(issued.keyFile, issued.key, { mode: 0o600 });
      return issued;
    },
  };
}
