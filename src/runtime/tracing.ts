import type { TracingConfig } from '../config/tracing-schema.js';
import { samplerNames } from '../config/tracing-schema.js';
import type { Metrics } from '../observe/metrics.js';
import type { Tracing, TracingSettings } from '../observe/tracing.js';
import type { Closers } from './closers.js';
import type { Env, OtelVariables } from './env.js';

/** OTLP/HTTP's default traces URL (the OpenTelemetry Collector's and Jaeger's port 4318). */
const defaultEndpoint = 'http://localhost:4318/v1/traces';

/**
 * Starts tracing when `tracing.enabled` says so and `OTEL_SDK_DISABLED` does not say `true`: the SDK is
 * imported only then, so that a gateway without tracing loads nothing of OpenTelemetry. Each process
 * that serves the data plane (a worker among them) exports its own spans. Its closer, pushed before the
 * upstream's and the gateway's, runs after them: the spans of the exchanges the drain ended are exported,
 * within `flushWithin()` ms (what the drain left of `shutdownTimeout`) and `exportTimeout`.
 */
export async function openTracing(
  config: TracingConfig,
  flushWithin: () => number,
  env: Env,
  metrics: Metrics,
  closers: Closers,
): Promise<Tracing | null> {
  if (!config.enabled || env.otel.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return null;
  const settings = tracingSettings(config, env.otel, (message) => env.logger.warn(message));
  // A backend's credentials (an API key in a field, the endpoint's user or query) are secrets as the
  // config's keys are, whether the config or the OTEL_* variables gave them.
  env.secrets?.add([...Object.values(settings.headers), ...credentialsOf(settings.endpoint)]);
  const endpoint = withoutCredentials(settings.endpoint);
  const { startOtelTracing } = await import('../observe/otel-tracing.js');
  const logger = env.logger.child({ component: 'tracing' });
  const tracing = startOtelTracing({
    settings,
    onDropped: (spans, reason) => metrics.tracingSpansDropped.inc({ reason }, spans),
    onExportState: (failing, error) => {
      if (failing)
        logger.warn(
          { err: error, endpoint },
          'exporting spans failed: they are dropped until the collector answers',
        );
      else logger.info({ endpoint }, 'exporting spans works again');
    },
    timers: env.clock,
  });
  closers.push('tracing', () => tracing.close(Math.min(flushWithin(), settings.exportTimeoutMs)));
  logger.info({ endpoint, sampler: settings.sampler, ratio: settings.ratio }, 'tracing on');
  return tracing;
}

/** The user, password and query values of an endpoint URL: what a backend may take as credentials. */
function credentialsOf(endpoint: string): string[] {
  const url = new URL(endpoint);
  return [
    decodeURIComponent(url.username),
    decodeURIComponent(url.password),
    ...url.searchParams.values(),
  ].filter((value) => value !== '');
}

/** The endpoint as the log shows it: no user, password or query. */
function withoutCredentials(endpoint: string): string {
  const url = new URL(endpoint);
  return `${url.origin}${url.pathname}`;
}

/**
 * The exporter's and sampler's settings: each key of the config first, then the standard `OTEL_*`
 * variable that says the same (OpenTelemetry's own rule: what is configured wins over the environment),
 * then OpenTelemetry's default. A variable that cannot be read is warned of and left out.
 */
export function tracingSettings(
  config: TracingConfig,
  otel: OtelVariables,
  warn: (message: string) => void,
): TracingSettings {
  const resource = keyValues(otel.OTEL_RESOURCE_ATTRIBUTES, 'OTEL_RESOURCE_ATTRIBUTES', warn);
  resource['service.name'] =
    config.serviceName ?? otel.OTEL_SERVICE_NAME ?? resource['service.name'] ?? 'quotagate';
  const sampler = samplerOf(config, otel, warn);
  return {
    endpoint: config.endpoint ?? otel.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? baseEndpoint(otel),
    headers: {
      ...keyValues(otel.OTEL_EXPORTER_OTLP_HEADERS, 'OTEL_EXPORTER_OTLP_HEADERS', warn),
      ...keyValues(otel.OTEL_EXPORTER_OTLP_TRACES_HEADERS, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS', warn),
      ...config.headers,
    },
    resource,
    sampler,
    ratio: config.sampleRatio ?? ratioOf(otel.OTEL_TRACES_SAMPLER_ARG, sampler, warn),
    maxQueueSize: config.maxQueueSize,
    maxExportBatchSize: config.maxExportBatchSize,
    scheduledDelayMs: config.scheduledDelay,
    exportTimeoutMs: config.exportTimeout,
  };
}

/** `OTEL_EXPORTER_OTLP_ENDPOINT` is a base URL: the signal's path is added to it (the OTLP spec's rule). */
function baseEndpoint(otel: OtelVariables): string {
  const base = otel.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (base === undefined) return defaultEndpoint;
  return `${base.endsWith('/') ? base.slice(0, -1) : base}/v1/traces`;
}

function samplerOf(
  config: TracingConfig,
  otel: OtelVariables,
  warn: (message: string) => void,
): TracingSettings['sampler'] {
  if (config.sampler !== undefined) return config.sampler;
  if (config.sampleRatio !== undefined) return 'parentbased_traceidratio';
  const named = otel.OTEL_TRACES_SAMPLER?.trim().toLowerCase();
  if (named === undefined) return 'parentbased_always_on';
  const known = samplerNames.find((name) => name === named);
  if (known !== undefined) return known;
  warn(
    `OTEL_TRACES_SAMPLER: '${named}' is not one of ${samplerNames.join(', ')}: parentbased_always_on is used`,
  );
  return 'parentbased_always_on';
}

function ratioOf(arg: string | undefined, sampler: string, warn: (message: string) => void): number {
  if (arg === undefined) return 1;
  const ratio = Number(arg);
  if (arg.trim() !== '' && ratio >= 0 && ratio <= 1) return ratio;
  if (sampler.endsWith('traceidratio'))
    warn(`OTEL_TRACES_SAMPLER_ARG: '${arg}' is no ratio from 0 to 1: 1 is used`);
  return 1;
}

/** `key=value,key=value` with percent-encoded values (W3C Baggage's form, as the OTEL_* variables take). */
function keyValues(
  text: string | undefined,
  name: string,
  warn: (message: string) => void,
): Record<string, string> {
  const values: Record<string, string> = {};
  if (text === undefined) return values;
  for (const item of text.split(',')) {
    const at = item.indexOf('=');
    const key = at === -1 ? '' : item.slice(0, at).trim();
    if (key === '') {
      if (item.trim() !== '') warn(`${name}: '${item.trim()}' is no key=value pair: left out`);
      continue;
    }
    try {
      values[key] = decodeURIComponent(item.slice(at + 1).trim());
    } catch {
      warn(`${name}: the value of '${key}' is not percent-encoded: left out`);
    }
  }
  return values;
}
