import http from 'node:http';
import { chat } from './llm-gateway.js';
import { basicAuth, devKey } from './test-gateway.js';
import { startUpstream, type TestUpstream } from './upstream.js';

/** An upstream whose answers are held after their first bytes (`startSlowAnswerUpstream`). */
export interface SlowAnswerUpstream extends TestUpstream {
  /** The `x-call` of each request whose answer is open now. */
  open: Set<string>;
  /** The `x-call` of each request cut before its answer's end, in the order the upstream heard of it. */
  cut: string[];
  /** Lets every answer, held or to come, send its rest and end. */
  letGo(): void;
}

/**
 * An LLM-shaped upstream whose every answer sends its head (`contentType`) and `first` at once, then
 * waits for `letGo()` before it sends `rest`: answers stay open upstream, as a model's server keeps
 * writing, for as long as the test wants.
 */
export async function startSlowAnswerUpstream(
  contentType: string,
  first: string,
  rest: string,
): Promise<SlowAnswerUpstream> {
  let letGo!: () => void;
  const gate = new Promise<void>((resolve) => (letGo = resolve));
  const open = new Set<string>();
  const cut: string[] = [];
  const upstream = await startUpstream((req, res) => {
    const call = String(req.headers['x-call']);
    open.add(call);
    res.on('close', () => {
      open.delete(call);
      if (!res.writableFinished) cut.push(call);
    });
    res.writeHead(200, { 'content-type': contentType });
    res.write(first);
    void gate.then(() => res.end(rest));
  });
  return { ...upstream, open, cut, letGo };
}

/**
 * POSTs a chat completion to `path` of the gateway at `url` with `headers`, and hangs up at the first
 * bytes of the answer's body; resolves then.
 */
export function leaveAfterFirstBytes(
  url: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${url}${path}`,
      {
        method: 'POST',
        agent: false,
        headers: { authorization: basicAuth(devKey), 'content-type': 'application/json', ...headers },
      },
      (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      },
    );
    req.on('error', (error) => {
      if (!req.destroyed) reject(error);
    });
    req.end(JSON.stringify(chat));
  });
}
