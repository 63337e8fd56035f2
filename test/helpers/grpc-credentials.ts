import { metadataOf } from './grpc-greeter.js';
import { basicAuth, devKey } from './test-gateway.js';

/** The project's development key as Basic credentials: the fields of a request the gateway admits. */
export const withKey = { authorization: basicAuth(devKey) };

/** The same credentials as the metadata of a gRPC call. */
export const credentials = () => metadataOf(withKey);
