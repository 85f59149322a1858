// Tracing settings, as every OpenTelemetry user expects them: the standard OTEL_* variables
// (OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT / _PROTOCOL, OTEL_TRACES_SAMPLER[_ARG], OTEL_SDK_DISABLED,
// OTEL_TRACES_EXPORTER; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are read by the resource
// detector, OTEL_BSP_* by the batch processor, OTEL_EXPORTER_OTLP_[TRACES_]HEADERS / _TIMEOUT /
// _COMPRESSION by the exporter), with Baton's `--otlp-endpoint` / `otlp_endpoint` above them.
// No OpenTelemetry import here: the SDK is loaded only when tracing is on (router/otel/tracing.ts).
import { ConfigError } from '../config-error.ts';

export type OtlpProtocol = 'http/protobuf' | 'http/json';

export type SamplerName = 'always_on' | 'always_off' | 'traceidratio' | 'parentbased_always_on' | 'parentbased_always_off' | 'parentbased_traceidratio';
const SAMPLERS: readonly SamplerName[] = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'];

export interface TracingSettings {
  /** Where spans are POSTed (the full traces URL). */
  url: string;
  /** Which setting named it, for messages. */
  urlFrom: string;
  protocol: OtlpProtocol;
  /** The head sampler, as OTEL_TRACES_SAMPLER names it, and its ratio (OTEL_TRACES_SAMPLER_ARG). */
  samplerName: SamplerName;
  samplerArg: number | null;
  /**
   * Requests the sampler dropped are still exported when one of their attempts failed (migrated
   * or failed requests): off only with a sampler that samples nothing (always_off,
   * parentbased_always_off), which is how tracing is switched off by sampling.
   */
  keepFailed: boolean;
}

const TRACES_PATH = '/v1/traces';

/** A base endpoint (OTEL_EXPORTER_OTLP_ENDPOINT's meaning) to the traces URL. */
function tracesUrl(base: string): string {
  const trimmed = base.replace(/\/+$/, '');
  return trimmed.endsWith(TRACES_PATH) ? trimmed : trimmed + TRACES_PATH;
}

function checkUrl(url: string, from: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new ConfigError(`${from}: not a URL: ${JSON.stringify(url)}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ConfigError(`${from}: OTLP/HTTP needs an http:// or https:// URL, got ${JSON.stringify(url)}`);
  return url;
}

const nonEmpty = (v: string | undefined): string | undefined => (v === undefined || v.trim() === '' ? undefined : v.trim());

function ratioArg(env: NodeJS.ProcessEnv): number {
  const raw = nonEmpty(env.OTEL_TRACES_SAMPLER_ARG);
  if (raw === undefined) return 1;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0 || n > 1) throw new ConfigError(`environment OTEL_TRACES_SAMPLER_ARG: a ratio from 0 to 1, got ${JSON.stringify(raw)}`);
  return n;
}

/** OTEL_TRACES_SAMPLER as the specification names its values (default parentbased_always_on). */
function samplerFromEnv(env: NodeJS.ProcessEnv): { name: SamplerName; arg: number | null } {
  const name = (nonEmpty(env.OTEL_TRACES_SAMPLER) ?? 'parentbased_always_on').toLowerCase();
  if (!(SAMPLERS as readonly string[]).includes(name)) {
    throw new ConfigError(`environment OTEL_TRACES_SAMPLER: Baton supports ${SAMPLERS.join(', ')}; got ${JSON.stringify(name)}`);
  }
  return { name: name as SamplerName, arg: name.endsWith('traceidratio') ? ratioArg(env) : null };
}

/**
 * The tracing settings, or null when tracing is off: no endpoint anywhere, OTEL_SDK_DISABLED=true,
 * or OTEL_TRACES_EXPORTER=none. Throws ConfigError for a value Baton cannot honour.
 */
export function tracingSettings(config: { otlpEndpoint: string | null }, env: NodeJS.ProcessEnv = process.env): TracingSettings | null {
  if (nonEmpty(env.OTEL_SDK_DISABLED)?.toLowerCase() === 'true') return null;
  let url: string;
  let urlFrom: string;
  const traces = nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  const base = nonEmpty(env.OTEL_EXPORTER_OTLP_ENDPOINT);
  if (config.otlpEndpoint !== null) {
    urlFrom = 'otlp-endpoint';
    url = checkUrl(tracesUrl(config.otlpEndpoint), urlFrom);
  } else if (traces !== undefined) {
    urlFrom = 'environment OTEL_EXPORTER_OTLP_TRACES_ENDPOINT';
    url = checkUrl(traces, urlFrom); // the signal-specific endpoint is used as given
  } else if (base !== undefined) {
    urlFrom = 'environment OTEL_EXPORTER_OTLP_ENDPOINT';
    url = checkUrl(tracesUrl(base), urlFrom);
  } else {
    return null;
  }
  const exporters = nonEmpty(env.OTEL_TRACES_EXPORTER)?.toLowerCase().split(',').map((s) => s.trim()).filter(Boolean);
  if (exporters && exporters.includes('none')) return null;
  if (exporters && exporters.length > 0 && !exporters.includes('otlp')) {
    throw new ConfigError(`environment OTEL_TRACES_EXPORTER: Baton exports traces with otlp only (or none), got ${JSON.stringify(env.OTEL_TRACES_EXPORTER)}`);
  }
  const protocolFrom = nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL) !== undefined ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = (nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL) ?? nonEmpty(env.OTEL_EXPORTER_OTLP_PROTOCOL) ?? 'http/protobuf').toLowerCase();
  if (protocol !== 'http/protobuf' && protocol !== 'http/json') {
    throw new ConfigError(`environment ${protocolFrom}: Baton exports OTLP over HTTP, http/protobuf or http/json, got ${JSON.stringify(protocol)}${protocol === 'grpc' ? ' (point it at the collector\'s HTTP port, 4318)' : ''}`);
  }
  const s = samplerFromEnv(env);
  return { url, urlFrom, protocol, samplerName: s.name, samplerArg: s.arg, keepFailed: !s.name.endsWith('always_off') };
}

/** One line for the router's start-up output, or null when tracing is off. */
export function describeTracing(config: { otlpEndpoint: string | null }, env: NodeJS.ProcessEnv = process.env): string | null {
  const s = tracingSettings(config, env);
  if (!s) return null;
  const sampler = s.samplerArg === null ? s.samplerName : `${s.samplerName} ${s.samplerArg}`;
  return `OTLP ${s.protocol} to ${s.url}, sampler ${sampler}${s.keepFailed ? ', failed and migrated requests always kept' : ''}`;
}
