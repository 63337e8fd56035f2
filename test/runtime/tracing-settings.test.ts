import { describe, expect, it } from 'vitest';
import { tracingSchema } from '../../src/config/tracing-schema.js';
import { tracingSettings } from '../../src/runtime/tracing.js';
import type { OtelVariables } from '../../src/runtime/env.js';

const config = (values: Record<string, unknown> = {}) => tracingSchema.parse({ enabled: true, ...values });

function settings(values: Record<string, unknown>, otel: OtelVariables = {}) {
  const warnings: string[] = [];
  return { ...tracingSettings(config(values), otel, (message) => warnings.push(message)), warnings };
}

describe('the tracing settings: the config first, then the OTEL_* variables, then the defaults', () => {
  it("takes OpenTelemetry's defaults when neither says anything", () => {
    expect(settings({})).toMatchObject({
      endpoint: 'http://localhost:4318/v1/traces',
      headers: {},
      resource: { 'service.name': 'quotagate' },
      sampler: 'parentbased_always_on',
      ratio: 1,
      warnings: [],
    });
  });

  it('adds /v1/traces to OTEL_EXPORTER_OTLP_ENDPOINT, and takes the traces endpoint as it is', () => {
    expect(settings({}, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).endpoint).toBe(
      'http://collector:4318/v1/traces',
    );
    expect(
      settings(
        {},
        {
          OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces:9999/in',
        },
      ).endpoint,
    ).toBe('http://traces:9999/in');
    expect(
      settings(
        { endpoint: 'http://config:4318/v1/traces' },
        { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://env/' },
      ).endpoint,
    ).toBe('http://config:4318/v1/traces');
  });

  it('merges headers name by name, the config over the traces variable over the general one', () => {
    expect(
      settings(
        { headers: { 'x-key': 'config' } },
        {
          OTEL_EXPORTER_OTLP_HEADERS: 'x-key=general,x-team=a%20b',
          OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-team=traces',
        },
      ).headers,
    ).toEqual({ 'x-key': 'config', 'x-team': 'traces' });
  });

  it('names the service by the config, else OTEL_SERVICE_NAME, else the resource attributes', () => {
    const resource = { OTEL_RESOURCE_ATTRIBUTES: 'service.name=attr,region=eu' };
    expect(settings({}, resource).resource).toEqual({ 'service.name': 'attr', region: 'eu' });
    expect(settings({}, { ...resource, OTEL_SERVICE_NAME: 'env' }).resource['service.name']).toBe('env');
    expect(
      settings({ serviceName: 'conf' }, { ...resource, OTEL_SERVICE_NAME: 'env' }).resource['service.name'],
    ).toBe('conf');
  });

  it('samples by the config ratio with the parent-based ratio sampler, over OTEL_TRACES_SAMPLER', () => {
    const env = { OTEL_TRACES_SAMPLER: 'always_off', OTEL_TRACES_SAMPLER_ARG: '0.5' };
    expect(settings({ sampleRatio: 0.25 }, env)).toMatchObject({
      sampler: 'parentbased_traceidratio',
      ratio: 0.25,
    });
    expect(settings({}, env)).toMatchObject({ sampler: 'always_off', ratio: 0.5 });
    expect(settings({ sampler: 'traceidratio' }, env)).toMatchObject({ sampler: 'traceidratio', ratio: 0.5 });
  });

  it('warns of an unknown sampler, a ratio out of range and a pair without =, and leaves them out', () => {
    const read = settings(
      {},
      {
        OTEL_TRACES_SAMPLER: 'jaeger_remote',
        OTEL_TRACES_SAMPLER_ARG: '7',
        OTEL_RESOURCE_ATTRIBUTES: 'lonely,ok=1,bad=%E0%A4%A',
      },
    );
    expect(read).toMatchObject({ sampler: 'parentbased_always_on', ratio: 1, resource: { ok: '1' } });
    expect(read.resource.bad).toBeUndefined();
    expect(read.warnings).toEqual([
      "OTEL_RESOURCE_ATTRIBUTES: 'lonely' is no key=value pair: left out",
      "OTEL_RESOURCE_ATTRIBUTES: the value of 'bad' is not percent-encoded: left out",
      "OTEL_TRACES_SAMPLER: 'jaeger_remote' is not one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio: parentbased_always_on is used",
    ]);
  });

  it('refuses a ratio out of 0..1 and an endpoint that is no http(s) URL in the config', () => {
    expect(tracingSchema.safeParse({ sampleRatio: 1.5 }).error?.issues[0]?.message).toBe(
      'must be a number from 0 to 1',
    );
    expect(tracingSchema.safeParse({ endpoint: 'grpc://collector:4317' }).error?.issues[0]?.message).toBe(
      'must be an http(s) URL',
    );
  });
});
