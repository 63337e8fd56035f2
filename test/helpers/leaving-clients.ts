import http from 'node:http';
import { chat } from './llm-gateway.js';
import { basicAuth, devKey } from './test-gateway.js';

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
