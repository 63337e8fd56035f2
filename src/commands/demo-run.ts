import type { LoadedConfig } from '../config/load-config.js';
import { startDemoUpstream } from '../demo/demo-upstream.js';
import { isPasswordHash } from '../kit/password-hash.js';
import { listenError } from '../kit/listen-errors.js';
import { projectApplicationId } from '../applications/application-ids.js';
import { isMembership, type DeclaredDefinition } from '../quota/declared-quotas.js';
import type { RunningGateway } from '../runtime/running-gateway.js';

export type Stoppable = { close(): Promise<void> };

/** Starts the demo upstream where the first API of the config points, when that is a local http URL. */
export async function startDemo(loaded: LoadedConfig): Promise<Stoppable | null> {
  const upstream = loaded.config.apis[0]?.upstream;
  // A pool of targets is not the demo's: the demo upstream is one local URL.
  if (typeof upstream !== 'string') return null;
  const url = new URL(upstream);
  if (url.protocol !== 'http:' || !['127.0.0.1', 'localhost'].includes(url.hostname)) return null;
  const port = Number(url.port || 80);
  return startDemoUpstream(port, '127.0.0.1').catch((error: unknown) => {
    throw listenError(
      error,
      `the demo upstream's port ${port} (where apis[0].upstream points)`,
      'DEMO_UPSTREAM_PORT (the shipped conf/default.js reads it) or apis[0].upstream',
    );
  });
}

export function demoBanner(loaded: LoadedConfig, running: RunningGateway): string {
  const { config, environment } = loaded;
  const key = config[`apikey_${environment}`] ?? '';
  const api = config.apis[0];
  const sample = api ? `${api.basePath === '/' ? '' : api.basePath}/1` : '/';
  const { http, https } = running.ports;
  // With `port: false` the data plane is HTTPS only.
  const base = http === undefined ? `https://127.0.0.1:${https}` : `http://127.0.0.1:${http}`;
  const adminBase = `${config.admin.tls ? 'https' : 'http'}://127.0.0.1:${running.ports.admin}`;
  const admin = config.admin.users[0];
  // conf/ may hold only the password's hash: then the banner names the user, and curl asks for it.
  const hashed = admin ? isPasswordHash(admin.password) : false;
  const adminLines = admin
    ? [
        hashed
          ? `  console     ${adminBase}/  (log in as ${admin.username}, with the password whose hash conf/ holds)`
          : `  console     ${adminBase}/  (log in as ${admin.username} / ${admin.password})`,
        '  the quotas, from the portal Quota API:',
        `    curl -u '${hashed ? admin.username : `${admin.username}:${admin.password}`}' ${adminBase}/api/portal/v1.3/quotas`,
        '',
      ]
    : [];
  // A quota declared for the project's own key (the shipped config has one): a loop that reaches its 429.
  const projectQuota = config.quotas.find(
    (quota): quota is DeclaredDefinition =>
      !isMembership(quota) && quota.application === projectApplicationId,
  );
  const limit = projectQuota?.restrictions.find((restriction) => restriction.type === 'throttle');
  const quotaLines =
    projectQuota && limit?.type === 'throttle'
      ? [
          `  a quota is at work: "${projectQuota.name}", ${limit.config.messages} calls per ${limit.config.per} ${limit.config.period};`,
          '  watch RateLimit count down to a 429 with Retry-After:',
          `    for i in $(seq ${Math.min(Number(limit.config.messages) + 1, 20)}); do curl -s -D - -o /dev/null -u '${key}:' ${base}${sample} | grep -iE '^(HTTP/|ratelimit:|retry-after:)'; done`,
          ...(admin
            ? [
                '  and in the console: Live usage (and Quotas, where it shows read-only: it is declared in conf/)',
              ]
            : []),
          '',
        ]
      : [];
  return [
    '',
    'quotagate is running (demo)',
    `  gateway  ${base}    admin  ${adminBase} (/healthz /readyz /metrics)`,
    `  ${environment} key  ${key}`,
    '',
    '  with the key, the demo upstream answers (200):',
    `    curl -i -u '${key}:' ${base}${sample}`,
    '  without it, the gateway refuses (401):',
    `    curl -i ${base}${sample}`,
    '',
    ...quotaLines,
    ...adminLines,
    '  Ctrl-C stops it.',
    '',
  ].join('\n');
}
