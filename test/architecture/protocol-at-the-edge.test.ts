import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { protocolReadsOutsideTheEdge } from '../helpers/protocol-readers.js';
import { useTempDirs } from '../helpers/temp-dirs.js';

/** A src/ of its own holding `files` (path from src → text). */
function source(dir: string, files: Record<string, string>): string {
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), text);
  }
  return dir;
}

describe('the protocol at the edge (issue 43)', () => {
  const tempDirs = useTempDirs('quotagate-protocol-readers-');

  it('is read by edge/, answers/ and upstream/ alone: no step sees the HTTP version, Upgrade or gRPC', () => {
    expect(protocolReadsOutsideTheEdge('src')).toEqual([]);
  });

  it('names each step that reads the version, an upgrade flag or the gRPC content type', () => {
    const src = source(tempDirs.make(), {
      'gateway/steps/admit.ts': 'if (req.httpVersionMajor === 2) go();\nconst fine = 1;\n',
      'gateway/pipeline.ts': 'if (record.upgradeHead !== null) open();\n',
      'auth/scheme.ts': "if (api.config.protocol === 'grpc') call();\n",
      'quota/select.ts': 'const call = isGrpcCall(req);\n',
      'gateway/edge/http1.ts': 'const v = req.httpVersionMajor;\n',
      'gateway/answers/grpc.ts': 'if (isGrpcCall(res.req)) status();\n',
      'upstream/dispatch.ts': 'if (exchange.grpc) trailers();\n',
    });
    expect(protocolReadsOutsideTheEdge(src).sort()).toEqual([
      "auth/scheme.ts:1: if (api.config.protocol === 'grpc') call();",
      'gateway/pipeline.ts:1: if (record.upgradeHead !== null) open();',
      'gateway/steps/admit.ts:1: if (req.httpVersionMajor === 2) go();',
      'quota/select.ts:1: const call = isGrpcCall(req);',
    ]);
  });
});
