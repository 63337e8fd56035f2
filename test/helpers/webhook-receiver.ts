import { createHmac, timingSafeEqual } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What a receiver answers: a status, or nothing at all (the request hangs until the receiver closes). */
export type ReceiverAnswer = number | 'hang';

/** An event the receiver got, with the check of its signature. */
export interface ReceivedEvent {
  /** The body parsed: a CloudEvent. */
  event: { type: string; id: string; data: Record<string, unknown> } & Record<string, unknown>;
  contentType: string | undefined;
  /** Whether `X-Quotagate-Signature` is the HMAC-SHA256 of the raw body with the receiver's secret. */
  signed: boolean;
}

export interface WebhookReceiver {
  url: string;
  /** Events answered with a 2xx, in the order they came. */
  delivered: ReceivedEvent[];
  /** Every request that came, whatever it was answered. */
  attempts: ReceivedEvent[];
  /** What the next requests are answered. */
  answer: ReceiverAnswer;
  /** Stops listening (the port then refuses connections); `open` listens again on the same port. */
  stop(): Promise<void>;
  open(): Promise<void>;
  close(): Promise<void>;
}

/** An HTTP receiver of webhooks on 127.0.0.1 that checks each body's signature with `secret`. */
export async function startWebhookReceiver(secret: string): Promise<WebhookReceiver> {
  const hanging: ServerResponse[] = [];
  const receiver = {
    url: '',
    delivered: [] as ReceivedEvent[],
    attempts: [] as ReceivedEvent[],
    answer: 200 as ReceiverAnswer,
  };
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`);
      const given = Buffer.from(String(req.headers['x-quotagate-signature'] ?? ''));
      const received: ReceivedEvent = {
        event: JSON.parse(raw.toString('utf8')) as ReceivedEvent['event'],
        contentType: req.headers['content-type'],
        signed: given.length === expected.length && timingSafeEqual(given, expected),
      };
      receiver.attempts.push(received);
      const { answer } = receiver;
      if (answer === 'hang') {
        hanging.push(res);
        return;
      }
      if (answer >= 200 && answer < 300) receiver.delivered.push(received);
      res.writeHead(answer).end();
    });
  });
  let port = 0;
  const listen = () =>
    new Promise<void>((resolve) => {
      server.listen(port, '127.0.0.1', () => {
        port = (server.address() as AddressInfo).port;
        resolve();
      });
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const res of hanging.splice(0)) res.destroy();
      server.closeAllConnections();
      server.close(() => resolve());
    });
  await listen();
  receiver.url = `http://127.0.0.1:${port}/hooks`;
  return Object.assign(receiver, {
    stop,
    open: listen,
    close: async () => {
      if (server.listening) await stop();
    },
  });
}
