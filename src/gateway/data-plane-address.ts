/**
 * The ports the data plane listens on: `http` absent with `port: false`, `https` without `tls`. What a
 * worker says it listens on, the `ports` of a running gateway, and where the console's test requests go.
 */
export interface DataPlaneAddress {
  http?: number;
  https?: number;
}
