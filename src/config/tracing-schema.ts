import { z } from 'zod';

/** The samplers OpenTelemetry names in `OTEL_TRACES_SAMPLER`, which `tracing.sampler` takes too. */
export const samplerNames = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;

const sampler = 'must be one of ' + samplerNames.join(', ');
const ratio = 'must be a number from 0 to 1';
const positiveInt = (message: string) => z.int({ error: message }).min(1, { error: message });

/**
 * Traces (docs/tracing.md): each exchange a server span, exported in the background over OTLP/HTTP.
 * Keys left out are taken from the standard `OTEL_*` variables, then from OpenTelemetry's defaults; a
 * change takes a restart.
 */
export const tracingSchema = z
  .strictObject({
    /** Off by default: nothing of OpenTelemetry is loaded then. `OTEL_SDK_DISABLED=true` turns it off too. */
    enabled: z.boolean({ error: 'must be true or false' }).default(false),
    /**
     * The OTLP/HTTP traces URL, used as it is (`http://collector:4318/v1/traces`); else
     * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`.
     */
    endpoint: z
      .string({ error: 'must be an http(s) URL' })
      .refine((value) => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol), {
        error: 'must be an http(s) URL',
      })
      .optional(),
    /** Fields sent with every export (an API key of a hosted backend); with `OTEL_EXPORTER_OTLP_HEADERS`'s. */
    headers: z.record(z.string(), z.string({ error: 'must be a string' })).optional(),
    /** `service.name` of the spans; else `OTEL_SERVICE_NAME`, else `quotagate`. */
    serviceName: z.string({ error: 'must be a string' }).min(1, { error: 'must not be empty' }).optional(),
    /** Else `OTEL_TRACES_SAMPLER`, else `parentbased_traceidratio` when `sampleRatio` is set, else `parentbased_always_on`. */
    sampler: z.enum(samplerNames, { error: sampler }).optional(),
    /** The ratio of traces a ratio sampler keeps, by trace id; else `OTEL_TRACES_SAMPLER_ARG`, else 1. */
    sampleRatio: z.number({ error: ratio }).min(0, { error: ratio }).max(1, { error: ratio }).optional(),
    /** Spans waiting for export at most: past it, spans are dropped and counted. */
    maxQueueSize: positiveInt('must be a whole number of at least 1').default(2048),
    /** Spans in one export at most. */
    maxExportBatchSize: positiveInt('must be a whole number of at least 1').default(512),
    /** Milliseconds between two exports. */
    scheduledDelay: positiveInt('must be a positive number of milliseconds').default(5_000),
    /** Milliseconds an export may take before it is given up (its spans dropped and counted). */
    exportTimeout: positiveInt('must be a positive number of milliseconds').default(10_000),
  })
  .default({
    enabled: false,
    maxQueueSize: 2048,
    maxExportBatchSize: 512,
    scheduledDelay: 5_000,
    exportTimeout: 10_000,
  });

export type TracingConfig = z.output<typeof tracingSchema>;
