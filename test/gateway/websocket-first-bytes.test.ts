import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { accessLines, basicAuth, devKey, petsConfig, startTestGateway } from '../helpers/test-gateway.js';
import { handshake, rawWebSocket, startWebSocketUpstream, wsUrl } from '../helpers/websockets.js';
import { useSuiteUpstream } from '../helpers/suite-upstream.js';

const defer = cleanupAfterEach();
const upstream = useSuiteUpstream(() => startWebSocketUpstream({ greeting: 'welcome' }));

const withKey = { authorization: basicAuth(devKey) };

/**
 * Opens a WebSocket with the `ws` client (offering permessage-deflate, as it does by default), listening
 * for messages from the start; once open, sends `after` and resolves with every message received up to
 * its echo (or up to the close, when it never comes).
 */
function messagesUpToEcho(url: string, after: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: withKey });
    const messages: string[] = [];
    ws.on('message', (data) => {
      messages.push(data.toString());
      if (messages.at(-1) === after) ws.close();
    });
    ws.once('open', () => ws.send(after));
    ws.once('close', () => resolve(messages));
    ws.once('error', reject);
  });
}

/** A masked client frame of a short text (RFC 6455 §5.2; the mask key is zero: the payload reads as sent). */
const maskedText = (text: string) =>
  Buffer.concat([Buffer.from([0x81, 0x80 | text.length, 0, 0, 0, 0]), Buffer.from(text)]);

describe('the first bytes of a WebSocket through the gateway', () => {
  it('relays the frame an upstream sends with its 101, before any other: 30 connections in a row', async () => {
    const gateway = await startTestGateway(petsConfig(upstream().url));
    defer(() => gateway.close());
    const seen: string[][] = [];
    for (let i = 0; i < 30; i += 1)
      seen.push(await messagesUpToEcho(wsUrl(gateway.url, '/pets/1'), `echo ${i}`));
    expect(seen).toEqual(seen.map((_, i) => ['welcome', `echo ${i}`]));
    // Every byte the upstream sent is counted too: the greeting's 9 bytes and the echo's each time.
    await expect.poll(() => accessLines(gateway).filter((line) => line.status === 101).length).toBe(30);
    const greeted = accessLines(gateway).filter((line) => line.status === 101);
    expect(greeted.every((line) => (line.bytesOut as number) >= 9 + 8)).toBe(true);
  });

  it('relays the frames a client sent right behind its handshake, in order, before its later ones', async () => {
    const gateway = await startTestGateway(petsConfig(upstream().url));
    defer(() => gateway.close());
    const before = upstream().received.length;
    const head = handshake('/pets/1', [`Authorization: ${withKey.authorization}`]);
    const early = Buffer.concat([maskedText('first'), maskedText('second')]).toString('latin1');
    const opened = await rawWebSocket(gateway.url, head + early);
    defer(() => void opened.socket.destroy());
    opened.socket.write(maskedText('third'));
    await expect.poll(() => upstream().received.slice(before)).toEqual(['first', 'second', 'third']);
  });
});
