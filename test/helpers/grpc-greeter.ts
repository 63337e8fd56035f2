import type { EventEmitter } from 'node:events';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/** The test service (test/fixtures/grpc/greeter.proto): one method of each kind of call. */
const definition = protoLoader.loadSync(path.resolve('test/fixtures/grpc/greeter.proto'), {
  keepCase: true,
});
const greeterPackage = grpc.loadPackageDefinition(definition) as unknown as {
  helloworld: { Greeter: grpc.ServiceClientConstructor };
};
const Greeter = greeterPackage.helloworld.Greeter;

export interface HelloRequest {
  name: string;
}
export interface HelloReply {
  message: string;
}

/** The ids the catalog gives the Greeter service's methods. */
export const greeterApiId = '7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d';
export const sayHelloId = '1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9';
const greeterMethods = [
  { id: sayHelloId, name: 'SayHello', verb: 'POST', path: '/SayHello' },
  { id: '2e3d4c5b-6a79-4887-96a5-b4c3d2e1f0a9', name: 'GatherHellos', verb: 'POST', path: '/GatherHellos' },
  { id: '3d4c5b6a-7988-4796-a5b4-c3d2e1f0a9b8', name: 'ListHellos', verb: 'POST', path: '/ListHellos' },
  { id: '4c5b6a79-8897-46a5-b4c3-d2e1f0a9b8c7', name: 'Chat', verb: 'POST', path: '/Chat' },
];

/** The catalog entry of the Greeter service at `upstream`, as a gRPC API. */
export const greeterApi = (upstream: string) => ({
  id: greeterApiId,
  name: 'Greeter',
  protocol: 'grpc',
  basePath: '/helloworld.Greeter',
  upstream,
  methods: greeterMethods,
});

/** What the upstream details a NOT_FOUND with, in `grpc-status-details-bin` (a google.rpc.Status, as bytes). */
export const statusDetails = Buffer.from([0x08, 0x05, 0x12, 0x03, 0x6e, 0x6f, 0x21]);

export interface GreeterUpstream {
  /** `host:port`, for a grpc-js client. */
  address: string;
  port: number;
  /** The metadata of each call, as the upstream received it. */
  calls: grpc.Metadata[];
  close(): Promise<void>;
}

/**
 * A real grpc-js server of the Greeter on 127.0.0.1:0, or the loopback `bind` given (`127.0.0.2:40123`),
 * TLS when given a key pair, with the services `addServices` adds beside it. SayHello greets,
 * with the call's `x-trace` echoed in its header metadata and `x-served-by` in its trailers; a name
 * `missing` is NOT_FOUND with details and `grpc-status-details-bin`; a name `silent` is never
 * answered (until the call is cancelled). GatherHellos greets every name it was sent, ListHellos sends
 * three greetings (and to a name beginning `held`, holds the call open after them until it is
 * cancelled; to one beginning `flood`, sends 500 as fast as it can, then holds it open), Chat answers
 * each message as it comes.
 */
export async function startGreeterUpstream(
  tls?: { key: Buffer; cert: Buffer },
  bind = '127.0.0.1:0',
  addServices: (server: grpc.Server) => void = () => undefined,
): Promise<GreeterUpstream> {
  const calls: grpc.Metadata[] = [];
  const trailer = () => {
    const metadata = new grpc.Metadata();
    metadata.set('x-served-by', 'greeter');
    return metadata;
  };
  const server = new grpc.Server();
  server.addService(Greeter.service, {
    SayHello(call: grpc.ServerUnaryCall<HelloRequest, HelloReply>, callback: grpc.sendUnaryData<HelloReply>) {
      calls.push(call.metadata);
      const { name } = call.request;
      if (name === 'silent') return;
      if (name === 'missing') {
        const metadata = trailer();
        metadata.set('grpc-status-details-bin', statusDetails);
        callback({ code: grpc.status.NOT_FOUND, details: 'no greeter for missing', metadata });
        return;
      }
      const header = new grpc.Metadata();
      header.set('x-trace', call.metadata.get('x-trace')[0] ?? 'none');
      call.sendMetadata(header);
      callback(null, { message: `Hello ${name}` }, trailer());
    },
    GatherHellos(
      call: grpc.ServerReadableStream<HelloRequest, HelloReply>,
      callback: grpc.sendUnaryData<HelloReply>,
    ) {
      calls.push(call.metadata);
      const names: string[] = [];
      call.on('data', (request: HelloRequest) => names.push(request.name));
      call.on('end', () => callback(null, { message: `Hello ${names.join(', ')}` }, trailer()));
    },
    ListHellos(call: grpc.ServerWritableStream<HelloRequest, HelloReply>) {
      calls.push(call.metadata);
      const { name } = call.request;
      const flood = name.startsWith('flood');
      for (let i = 1; i <= (flood ? 500 : 3); i += 1) call.write({ message: `Hello ${name} #${i}` });
      if (!name.startsWith('held') && !flood) call.end(trailer());
    },
    Chat(call: grpc.ServerDuplexStream<HelloRequest, HelloReply>) {
      calls.push(call.metadata);
      call.on('data', (request: HelloRequest) => call.write({ message: `Hello ${request.name}` }));
      call.on('end', () => call.end(trailer()));
    },
  });
  addServices(server);
  const credentials = tls
    ? grpc.ServerCredentials.createSsl(null, [{ private_key: tls.key, cert_chain: tls.cert }])
    : grpc.ServerCredentials.createInsecure();
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(bind, credentials, (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  return {
    address: `${bind.slice(0, bind.lastIndexOf(':'))}:${port}`,
    port,
    calls,
    // Calls still open (a `silent` one) are cut: the server stops at once.
    close: async () => server.forceShutdown(),
  };
}

/** How a call ended, as the grpc-js client saw it. */
export interface CallOutcome {
  replies: HelloReply[];
  /** The header metadata, when any came before the status. */
  headers: grpc.Metadata | null;
  status: grpc.StatusObject;
}

/** Any call of the client, as the events it emits. */
type AnyCall =
  | grpc.ClientUnaryCall
  | grpc.ClientReadableStream<HelloReply>
  | grpc.ClientWritableStream<HelloRequest>;

/** Waits for the call's status, gathering its replies and header metadata on the way. */
function outcomeOf(call: EventEmitter, replies: HelloReply[]): Promise<CallOutcome> {
  let headers: grpc.Metadata | null = null;
  call.on('metadata', (metadata: grpc.Metadata) => (headers = metadata));
  call.on('data', (reply: HelloReply) => replies.push(reply));
  // A failed call is also told as an 'error' (its status): grpc-js throws one no one listens to.
  call.on('error', () => undefined);
  return new Promise((resolve) =>
    call.on('status', (status: grpc.StatusObject) =>
      setImmediate(() => resolve({ replies, headers, status })),
    ),
  );
}

/** A grpc-js client of the Greeter at `address`, and one promise per kind of call. */
export function greeterClient(address: string, credentials = grpc.credentials.createInsecure()) {
  const client = new Greeter(address, credentials) as grpc.Client &
    Record<string, (...args: unknown[]) => AnyCall>;
  return {
    sayHello(
      name: string,
      metadata = new grpc.Metadata(),
      options: grpc.CallOptions = {},
    ): Promise<CallOutcome> {
      const replies: HelloReply[] = [];
      const call = client.SayHello!({ name }, metadata, options, (_error: unknown, reply?: HelloReply) => {
        if (reply) replies.push(reply);
      });
      return outcomeOf(call, replies);
    },
    gatherHellos(names: string[], metadata = new grpc.Metadata()): Promise<CallOutcome> {
      const replies: HelloReply[] = [];
      const call = client.GatherHellos!(metadata, (_error: unknown, reply?: HelloReply) => {
        if (reply) replies.push(reply);
      }) as grpc.ClientWritableStream<HelloRequest>;
      for (const name of names) call.write({ name });
      call.end();
      return outcomeOf(call, replies);
    },
    /** A GatherHellos left open: each `say` sends a name while it runs, and `end` asks for the answer. */
    openGather(metadata = new grpc.Metadata()) {
      const replies: HelloReply[] = [];
      const call = client.GatherHellos!(metadata, (_error: unknown, reply?: HelloReply) => {
        if (reply) replies.push(reply);
      }) as grpc.ClientWritableStream<HelloRequest>;
      return {
        outcome: outcomeOf(call, replies),
        say: (name: string) => call.write({ name }),
        end: () => call.end(),
      };
    },
    listHellos(name: string, metadata = new grpc.Metadata()): Promise<CallOutcome> {
      return outcomeOf(client.ListHellos!({ name }, metadata), []);
    },
    /** A ListHellos whose replies can be read while it runs (a `held…` name keeps it open until cancelled). */
    streamHellos(name: string, metadata = new grpc.Metadata()) {
      const replies: HelloReply[] = [];
      const call = client.ListHellos!({ name }, metadata) as grpc.ClientReadableStream<HelloReply>;
      return { replies, outcome: outcomeOf(call, replies), cancel: () => call.cancel() };
    },
    /**
     * A ListHellos whose client stops reading once `count` replies have come: it takes no more (its
     * stream is paused, and so flow control holds the sender back) until it is cancelled.
     */
    stalledHellos(name: string, count: number, metadata = new grpc.Metadata()) {
      const replies: HelloReply[] = [];
      const call = client.ListHellos!({ name }, metadata) as grpc.ClientReadableStream<HelloReply>;
      call.on('data', (reply: HelloReply) => {
        replies.push(reply);
        if (replies.length >= count) call.pause();
      });
      call.on('error', () => undefined);
      return { replies, cancel: () => call.cancel() };
    },
    /**
     * A Chat that sends each name only once the answer to the one before has come back: it can only
     * end if messages flow both ways while the call is open.
     */
    async chat(names: string[], metadata = new grpc.Metadata()): Promise<CallOutcome> {
      const call = client.Chat!(metadata) as unknown as grpc.ClientDuplexStream<HelloRequest, HelloReply>;
      const replies: HelloReply[] = [];
      const outcome = outcomeOf(call, replies);
      call.removeAllListeners('data');
      let next = 0;
      const sendNext = () => (next < names.length ? call.write({ name: names[next++]! }) : call.end());
      call.on('data', (reply: HelloReply) => {
        replies.push(reply);
        sendNext();
      });
      sendNext();
      return outcome;
    },
    /** A Chat left open: each `say` is answered while it runs, until the client or the gateway ends it. */
    openChat(metadata = new grpc.Metadata()) {
      const call = client.Chat!(metadata) as unknown as grpc.ClientDuplexStream<HelloRequest, HelloReply>;
      const replies: HelloReply[] = [];
      return {
        replies,
        outcome: outcomeOf(call, replies),
        say: (name: string) => call.write({ name }),
        end: () => call.end(),
      };
    },
    close: () => client.close(),
  };
}

/** Metadata of `pairs`, as a client sends it. */
export function metadataOf(pairs: Record<string, string>): grpc.Metadata {
  const metadata = new grpc.Metadata();
  for (const [key, value] of Object.entries(pairs)) metadata.set(key, value);
  return metadata;
}
