import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { startGreeterUpstream, type GreeterUpstream } from './grpc-greeter.js';

/** The gRPC health checking protocol's service (test/fixtures/grpc/health.proto). */
const definition = protoLoader.loadSync(path.resolve('test/fixtures/grpc/health.proto'), { keepCase: true });
const healthPackage = grpc.loadPackageDefinition(definition) as unknown as {
  grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } };
};
const Health = healthPackage.grpc.health.v1.Health;

/** HealthCheckResponse.ServingStatus, as proto-loader gives an enum (its name). */
export type ServingStatus = 'UNKNOWN' | 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';

export interface HealthUpstream extends GreeterUpstream {
  /**
   * What Check answers of each service ('' is the whole server), as grpc-health-check's
   * HealthImplementation does: a service not in it is NOT_FOUND; `'silent'` is never answered.
   */
  statuses: Map<string, ServingStatus | 'silent'>;
  /** The services the checks asked about, in order. */
  checked: string[];
}

/**
 * A real grpc-js server of the Greeter and of grpc.health.v1.Health (the whole server SERVING at first),
 * TLS when given a key pair.
 */
export async function startHealthUpstream(tls?: { key: Buffer; cert: Buffer }): Promise<HealthUpstream> {
  const statuses = new Map<string, ServingStatus | 'silent'>([['', 'SERVING']]);
  const checked: string[] = [];
  const upstream = await startGreeterUpstream(tls, '127.0.0.1:0', (server) =>
    server.addService(Health.service, {
      Check(
        call: grpc.ServerUnaryCall<{ service?: string }, { status: ServingStatus }>,
        callback: grpc.sendUnaryData<{ status: ServingStatus }>,
      ) {
        const service = call.request.service ?? '';
        checked.push(service);
        const status = statuses.get(service);
        if (status === 'silent') return;
        if (status === undefined)
          callback({ code: grpc.status.NOT_FOUND, details: `unknown service ${service}` });
        else callback(null, { status });
      },
    }),
  );
  return { ...upstream, statuses, checked };
}
