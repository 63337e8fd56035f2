/**
 * What "try it" (`POST /api/portal/v1.3/console/try`) answers: the data plane's answer with every
 * credential the gateway added taken out. The admin route returns it and the console shows it.
 */
export interface TryAnswer {
  status: number;
  headers: Record<string, string | string[]>;
  body: unknown;
  /** The body was cut at 1 MiB. */
  truncated: boolean;
  ms: number;
}
