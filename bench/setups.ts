import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { LoadProtocol } from './load.js';
import { freePort, listening, start, type Running } from './processes.js';
import {
  benchKey,
  neverRejecting,
  setSystemRestrictions,
  startQuotagate,
  type GatewayLayers,
} from './quotagate.js';

/** One server the bench loads: where to send requests, and the root of the process tree it runs as. */
export interface Target {
  name: string;
  url: string;
  pid: number;
  /** Its requests use the bench's redis-server, whose calls and CPU are then read too. */
  redis: boolean;
  /** The admin listener of a quotagate setup, which answers its own added latency (`/latency`). */
  adminUrl?: string;
  /** The headers of its requests, when not the bench key's basic Authorization. */
  headers?: Record<string, string>;
  /** What it is loaded with: HTTP/1.1 requests when absent, HTTP/2 streams, or WebSocket messages. */
  protocol?: LoadProtocol;
}

/** The URL a target of `protocol` is loaded at, on `port`. */
const urlOf = (port: number | string, protocol: LoadProtocol = 'http1') =>
  `${protocol === 'ws' ? 'ws' : 'http'}://127.0.0.1:${port}/pets/1`;

/** Starts servers for the bench in `work`; every one is stopped by pid through `track`. */
export class Setups {
  constructor(
    private readonly work: string,
    private readonly track: <T extends Running>(started: Promise<T>) => Promise<T>,
  ) {}

  /** An nginx serving `server` (the inside of a `server { }` block) and `http` (more of the `http` block). */
  async nginx(
    binary: string,
    name: string,
    server: string,
    http = '',
  ): Promise<{ port: number; pid: number }> {
    const port = await freePort();
    const dir = path.join(this.work, name);
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      path.join(dir, 'nginx.conf'),
      `worker_processes 1;\npid ${dir}/nginx.pid;\nerror_log ${dir}/error.log warn;\nevents { worker_connections 1024; }\n` +
        `http {\n  access_log off;\n  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy;\n` +
        `  fastcgi_temp_path ${dir}/fastcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;\n` +
        `  keepalive_requests 1000000;\n${http}  server {\n    listen 127.0.0.1:${port};\n${server}\n  }\n}\n`,
    );
    const started = await this.track(
      start(name, binary, ['-p', dir, '-c', path.join(dir, 'nginx.conf'), '-g', 'daemon off;'], () =>
        listening(port),
      ),
    );
    return { port, pid: started.child.pid! };
  }

  /** A Node process running one of bench/servers/*.js with `args` after its port. */
  async node(
    name: string,
    script: string,
    args: string[],
    redis: boolean,
    protocol?: LoadProtocol,
  ): Promise<Target> {
    const port = await freePort();
    const started = await this.track(
      start(name, process.execPath, [`dist/bench/servers/${script}`, String(port), ...args], () =>
        listening(port),
      ),
    );
    return {
      name,
      url: urlOf(port, protocol),
      pid: started.child.pid!,
      redis,
      ...(protocol ? { protocol } : {}),
    };
  }

  /** quotagate in front of `upstream`, with the layers asked for; `quota`: the two never-rejecting restrictions. */
  async quotagate(
    name: string,
    dir: string,
    upstream: string,
    store: Record<string, unknown>,
    layers: GatewayLayers & { quota: boolean; protocol?: LoadProtocol },
  ): Promise<Target> {
    const gateway = await this.track(startQuotagate(path.join(this.work, dir), upstream, store, layers));
    if (layers.quota) await setSystemRestrictions(gateway, neverRejecting);
    return {
      name,
      url: urlOf(new URL(gateway.url).port, layers.protocol),
      ...(layers.protocol ? { protocol: layers.protocol } : {}),
      pid: gateway.pid,
      redis: store.type === 'redis',
      adminUrl: gateway.adminUrl,
    };
  }

  /**
   * nginx doing the gateway's job: `auth_basic` with the bench key as user name and an empty password,
   * and two `limit_req` zones that never refuse (all traffic, and per user), in front of `upstreamPort`.
   */
  async nginxGateway(binary: string, name: string, upstreamPort: number): Promise<Target> {
    const dir = path.join(this.work, 'nginx-gateway');
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'htpasswd'), `${benchKey}:{PLAIN}\n`, { mode: 0o644 });
    // nginx's worker runs as another user when the bench runs as root: it must reach the file.
    for (const folder of [this.work, dir]) chmodSync(folder, 0o755);
    const { port, pid } = await this.nginx(
      binary,
      'nginx-gateway',
      `    location / {\n      auth_basic "quotagate"; auth_basic_user_file ${dir}/htpasswd;\n` +
        '      limit_req zone=all burst=1000000 nodelay; limit_req zone=peruser burst=1000000 nodelay;\n' +
        '      limit_req_status 429;\n' +
        '      proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection "";\n    }',
      '  limit_req_zone $server_name zone=all:1m rate=1000000r/s;\n' +
        '  limit_req_zone $remote_user zone=peruser:1m rate=1000000r/s;\n' +
        `  upstream backend { server 127.0.0.1:${upstreamPort}; keepalive 64; }\n`,
    );
    return { name, url: `http://127.0.0.1:${port}/pets/1`, pid, redis: false };
  }

  /**
   * HAProxy doing the gateway's job: a `userlist` with the bench key (empty password) checked by
   * `http_auth`, and a stick table counting every request's rate over an hour, refusing over a limit never
   * reached; one thread, keep-alive to `upstreamPort`.
   */
  async haproxyGateway(binary: string, name: string, upstreamPort: number): Promise<Target> {
    const port = await freePort();
    const dir = path.join(this.work, 'haproxy');
    mkdirSync(dir, { recursive: true });
    const config = path.join(dir, 'haproxy.cfg');
    writeFileSync(
      config,
      [
        'global',
        '  nbthread 1',
        'defaults',
        '  mode http',
        '  timeout connect 5s',
        '  timeout client 30s',
        '  timeout server 30s',
        '  http-reuse always',
        'userlist keys',
        `  user ${benchKey} insecure-password ""`,
        'frontend gateway',
        `  bind 127.0.0.1:${port}`,
        '  stick-table type string len 16 size 1k expire 1h store http_req_rate(1h),bytes_in_rate(1h)',
        '  http-request auth realm quotagate unless { http_auth(keys) }',
        '  http-request track-sc0 str(all)',
        '  http-request deny deny_status 429 if { sc_http_req_rate(0) gt 1000000000 }',
        '  default_backend upstream',
        'backend upstream',
        `  server upstream 127.0.0.1:${upstreamPort}`,
        '',
      ].join('\n'),
    );
    const started = await this.track(start(name, binary, ['-f', config], () => listening(port)));
    return { name, url: `http://127.0.0.1:${port}/pets/1`, pid: started.child.pid!, redis: false };
  }
}
