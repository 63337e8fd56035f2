import { execFile } from 'node:child_process';
import http2, { type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';

export interface Http2Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  trailers: IncomingHttpHeaders;
}

/** Opens an HTTP/2 session with Node's client: h2c by prior knowledge for http://, h2 by ALPN for https://. */
export function http2Session(baseUrl: string, ca?: string): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(baseUrl, ca ? { ca } : {});
    session.once('connect', () => {
      session.off('error', reject);
      session.on('error', () => undefined);
      resolve(session);
    });
    session.once('error', reject);
  });
}

/** One request on an open session; resolves once the stream has ended, with its trailers. */
export function http2Request(
  session: ClientHttp2Session,
  options: { method?: string; path: string; headers?: Record<string, string>; body?: string },
): Promise<Http2Answer> {
  return new Promise((resolve, reject) => {
    const method = options.method ?? 'GET';
    // CONNECT names no path (RFC 9113 §8.5).
    const stream = session.request({
      ':method': method,
      ...(method === 'CONNECT' ? {} : { ':path': options.path }),
      ...options.headers,
    });
    let headers: IncomingHttpHeaders = {};
    let trailers: IncomingHttpHeaders = {};
    let body = '';
    stream.setEncoding('utf8');
    stream.on('response', (received) => (headers = received));
    stream.on('trailers', (received) => (trailers = received));
    stream.on('data', (chunk: string) => (body += chunk));
    stream.on('error', reject);
    stream.on('end', () => resolve({ status: Number(headers[':status']), headers, body, trailers }));
    stream.end(options.body);
  });
}

/** One request on a session of its own, closed after the answer. */
export async function http2Fetch(
  baseUrl: string,
  options: { method?: string; path: string; headers?: Record<string, string>; body?: string; ca?: string },
): Promise<Http2Answer> {
  const session = await http2Session(baseUrl, options.ca);
  try {
    return await http2Request(session, options);
  } finally {
    session.close();
  }
}

/** Runs curl with `args`; resolves with what it printed, or rejects with its error output. */
export function curl(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('curl', ['--silent', '--show-error', ...args], (error, stdout, stderr) => {
      if (error) reject(new Error(`curl ${args.join(' ')}: ${stderr || error.message}`));
      else resolve(stdout);
    });
  });
}
