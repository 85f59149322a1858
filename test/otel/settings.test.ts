// Tracing configuration: the standard OTEL_* variables, with --otlp-endpoint above them.
import { describe, expect, it } from 'vitest';
import { describeTracing, tracingSettings } from '../../router/otel/settings.ts';
import { ConfigError, loadConfig } from '../../router/config.ts';
import { configFromArgv } from '../../cli/router.ts';

const off = { otlpEndpoint: null };

describe('tracingSettings', () => {
  it('is off without an endpoint, with OTEL_SDK_DISABLED, and with OTEL_TRACES_EXPORTER=none', () => {
    expect(tracingSettings(off, {})).toBeNull();
    expect(tracingSettings({ otlpEndpoint: 'http://c:4318' }, { OTEL_SDK_DISABLED: 'true' })).toBeNull();
    expect(tracingSettings(off, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' })).toBeNull();
  });

  it('takes the flag over the traces endpoint over the base endpoint, appending /v1/traces to a base', () => {
    expect(tracingSettings({ otlpEndpoint: 'http://flag:4318/' }, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:1/x' })?.url).toBe('http://flag:4318/v1/traces');
    expect(tracingSettings({ otlpEndpoint: 'http://flag:4318/v1/traces' }, {})?.url).toBe('http://flag:4318/v1/traces');
    expect(tracingSettings(off, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:1/custom', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://b:2' })?.url).toBe('http://t:1/custom');
    expect(tracingSettings(off, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://b:2/prefix' })?.url).toBe('http://b:2/prefix/v1/traces');
  });

  it('reads the protocol and the sampler as the specification names them', () => {
    const s = tracingSettings(off, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://b:2', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' });
    expect(s).toMatchObject({ protocol: 'http/json', samplerName: 'parentbased_traceidratio', samplerArg: 0.25, keepFailed: true });
    expect(tracingSettings(off, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://b:2' })).toMatchObject({ protocol: 'http/protobuf', samplerName: 'parentbased_always_on', keepFailed: true });
    expect(tracingSettings(off, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://b:2', OTEL_TRACES_SAMPLER: 'always_off' })?.keepFailed).toBe(false);
    expect(tracingSettings(off, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://b:2', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' })?.protocol).toBe('http/protobuf');
    expect(describeTracing({ otlpEndpoint: 'http://c:4318' }, {})).toBe('OTLP http/protobuf to http://c:4318/v1/traces, sampler parentbased_always_on, failed and migrated requests always kept');
  });

  it.each([
    [{ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' }, /OTEL_EXPORTER_OTLP_TRACES_PROTOCOL.*http\/protobuf or http\/json.*4318/],
    [{ OTEL_TRACES_SAMPLER: 'jaeger_remote' }, /OTEL_TRACES_SAMPLER/],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' }, /OTEL_TRACES_SAMPLER_ARG/],
    [{ OTEL_TRACES_EXPORTER: 'zipkin' }, /OTEL_TRACES_EXPORTER/],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'ftp://x' }, /OTEL_EXPORTER_OTLP_TRACES_ENDPOINT/],
  ])('refuses %j with a message naming it', (env, msg) => {
    const e = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://b:2', ...env };
    expect(() => tracingSettings(off, e)).toThrow(ConfigError);
    expect(() => tracingSettings(off, e)).toThrow(msg);
  });
});

describe('--otlp-endpoint and --trace-url-template', () => {
  it('come from flags, BATON_* variables and the file keys otlp_endpoint / trace_url_template', () => {
    const c = configFromArgv(['--otlp-endpoint', 'http://collector:4318', '--trace-url-template', 'http://jaeger:16686/trace/{trace_id}'], {});
    expect(c).toMatchObject({ otlpEndpoint: 'http://collector:4318', traceUrlTemplate: 'http://jaeger:16686/trace/{trace_id}' });
    expect(loadConfig({ env: { BATON_OTLP_ENDPOINT: 'https://tempo:4318' } }).otlpEndpoint).toBe('https://tempo:4318');
    expect(loadConfig({}).otlpEndpoint).toBeNull();
  });

  it('refuses a template without {trace_id} and an endpoint that is not http(s)', () => {
    expect(() => loadConfig({ flags: { traceUrlTemplate: 'http://jaeger/trace/' } })).toThrow(/trace-url-template must contain \{trace_id\}/);
    expect(() => loadConfig({ flags: { otlpEndpoint: 'collector:4318' } })).toThrow(/otlp-endpoint must be an http/);
  });
});
