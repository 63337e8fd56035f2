import { describe, expect, it } from 'vitest';
import { badConfig, problemsOf } from '../helpers/config-problems.js';
import { petsConfig, writeConfigDir } from '../helpers/test-gateway.js';
import { useTempDirs } from '../helpers/temp-dirs.js';

const dirs = useTempDirs('quotagate-upstream-tls-config-');

// One fixture per rule of `apis[].upstream.tls`: each changes the valid base.mjs once.
const rules: Array<[string, string]> = [
  [
    'upstream-tls-cert-without-key',
    'apis[1].upstream.tls.key: is required with tls.cert: a client certificate needs its key',
  ],
  [
    'upstream-tls-file-missing',
    'apis[1].upstream.tls.ca: cannot read test/fixtures/bad-config/upstream-tls-file-missing/missing-ca.pem (ENOENT)',
  ],
  [
    'upstream-tls-without-https-target',
    'apis[1].upstream.tls: applies to https:// targets only, and this upstream has none',
  ],
  [
    'upstream-tls-servername-ip',
    'apis[1].upstream.tls.servername: must be a DNS name, not an IP address (RFC 6066 §3)',
  ],
];

describe('loadConfig: the TLS of an upstream', () => {
  it.each(rules)('rejects %s with the file, the key path and the reason', async (name, message) => {
    expect(await problemsOf(badConfig(name))).toEqual([`${badConfig(name)}/default.mjs: ${message}`]);
  });

  it('names a key without its certificate, and every file it cannot read, in one pass', async () => {
    const missing = `${dirs.make()}/gone.pem`;
    const dir = writeConfigDir(
      petsConfig('http://127.0.0.1:9', {
        apis: [
          {
            ...(petsConfig('http://127.0.0.1:9').apis as Array<Record<string, unknown>>)[0],
            upstream: { targets: ['https://127.0.0.1:9443'], tls: { ca: missing, key: missing } },
          },
        ],
      }),
    );
    dirs.removeAfter(dir);
    expect(await problemsOf(dir)).toEqual([
      `${dir}/default.mjs: apis[0].upstream.tls.cert: is required with tls.key: a client certificate needs both`,
      `${dir}/default.mjs: apis[0].upstream.tls.ca: cannot read ${missing} (ENOENT)`,
      `${dir}/default.mjs: apis[0].upstream.tls.key: cannot read ${missing} (ENOENT)`,
    ]);
  });
});
