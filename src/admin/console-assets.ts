import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { extname, join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorsBody } from './admin-errors.js';

/**
 * Where `npm run build` puts the console (src/console compiled for the browser, with its page and style
 * sheet): the same place from src/admin and from dist/admin, so tests that run the sources serve it too.
 */
export const consoleDirectory = fileURLToPath(new URL('../../dist/console/', import.meta.url));

/**
 * The console's own policy: its scripts, styles and calls come from this origin only; no inline script
 * or style, no frame, no form posted elsewhere. Scripts set styles through the CSSOM, which it allows.
 */
const consolePolicy = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self'",
  "form-action 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

const contentTypes: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

/** Every file of the built console, read once: a URL only ever picks one of these, never a path on disk. */
function readAssets(directory: string): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  let files: string[];
  try {
    files = readdirSync(directory, { recursive: true, encoding: 'utf8' });
  } catch {
    return assets;
  }
  for (const file of files) {
    const type = contentTypes[extname(file)];
    if (!type) continue;
    const body = readFileSync(join(directory, file));
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    // The names readdirSync gives are relative to the directory already; a URL spells them with '/'.
    assets.set(file.split(sep).join('/'), { body, type, etag });
  }
  return assets;
}

/**
 * The admin console: `/` serves its page, `/console/…` its scripts and style sheet, to anyone (they
 * hold no data: every call the page makes needs a login). Served from memory with the console's own
 * Content-Security-Policy; an asset changes only with a new build, so its entity tag lets a browser
 * revalidate instead of downloading it again.
 */
export function registerConsole(app: FastifyInstance, directory = consoleDirectory): void {
  const assets = readAssets(directory);
  const send = (name: string, request: FastifyRequest, reply: FastifyReply) => {
    const asset = assets.get(name);
    if (!asset) {
      const message =
        name === 'index.html'
          ? 'the console was not built: run npm run build'
          : 'no such file of the console';
      return reply.code(404).send(errorsBody(404, [message]));
    }
    reply
      .header('content-security-policy', consolePolicy)
      .header('cache-control', 'no-cache')
      .header('etag', asset.etag);
    if (request.headers['if-none-match'] === asset.etag) return reply.code(304).send();
    return reply.type(asset.type).send(asset.body);
  };
  const open = { config: { public: true } };
  app.get('/', open, (request, reply) => send('index.html', request, reply));
  app.get('/console/*', open, (request: FastifyRequest<{ Params: { '*': string } }>, reply) =>
    send(request.params['*'], request, reply),
  );
}
