import { readFileSync } from 'node:fs';
import path from 'node:path';
import { filesUnder } from './files-under.js';

/**
 * What reads a request's protocol: its HTTP version, its upgrade (the `Upgrade` field, the upgrade head,
 * the WebSocket flag) and its gRPC content type, as the request path spells them.
 */
export const protocolReaders: readonly RegExp[] = [
  /\bhttpVersionMajor\b/,
  /\bhttpVersionMinor\b/,
  /\bhttpVersion\b/,
  /\bupgradeHead\b/,
  /\bopensWebSocket\b/,
  /\bheaders\.upgrade\b/,
  /\bisGrpcCall\b/,
  /\bisGrpcRequest\b/,
  /\.grpc\b/,
  /protocol === 'grpc'/,
];

/** The folders of the request path, below `src`, and those of them where the protocol may be read. */
export const requestPath = ['gateway', 'auth', 'quota', 'limiter', 'stores', 'applications'];
export const protocolFolders = ['gateway/edge', 'gateway/answers', 'upstream'];

/**
 * Each line of the request path under `src` that reads the protocol outside the folders that may,
 * as `<path from src>:<line>: <text>`.
 */
export function protocolReadsOutsideTheEdge(src: string): string[] {
  const found: string[] = [];
  for (const folder of requestPath) {
    let files: string[];
    try {
      files = filesUnder(path.join(src, folder));
    } catch {
      continue;
    }
    for (const file of files) {
      const name = path.relative(src, file).split(path.sep).join('/');
      if (!name.endsWith('.ts') || protocolFolders.some((allowed) => name.startsWith(`${allowed}/`)))
        continue;
      readFileSync(file, 'utf8')
        .split('\n')
        .forEach((text, i) => {
          if (protocolReaders.some((reader) => reader.test(text)))
            found.push(`${name}:${i + 1}: ${text.trim()}`);
        });
    }
  }
  return found;
}
