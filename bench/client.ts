import http from 'node:http';
import { benchAuthorization } from './quotagate.js';

/** GETs `url` with the bench's API key; resolves with the status once the body is read, 0 if the connection failed. */
export function getStatus(url: string, agent: http.Agent): Promise<number> {
  return new Promise((resolve) => {
    http
      .get(url, { agent, headers: { authorization: benchAuthorization } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      })
      .on('error', () => resolve(0));
  });
}
