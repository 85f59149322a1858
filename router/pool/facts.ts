// What probing and attempts taught about the workers, per format, as admission needs it: the
// sampling defaults they advertise, the limits they enforce (context length), the weights they
// serve now, and their prefix cache's hit rate.
import type { FormatName, ProbeResult } from '../core/types.ts';
import { UNPROBED } from '../formats/registry.ts';
import { speaks, type Worker } from './worker.ts';

/** Worker-advertised sampling defaults, as admission sees them (see samplingDefaults). */
export interface SamplingDefaults {
  /** Keys every probed worker advertises with the same value. */
  agreed: Readonly<Record<string, unknown>>;
  /** Keys some probed worker advertises and others advertise differently or not at all. */
  disputed: ReadonlySet<string>;
}

const NO_DEFAULTS: SamplingDefaults = Object.freeze({ agreed: Object.freeze({}), disputed: new Set<string>() });

export class WorkerFacts {
  /** samplingDefaults() per format, recomputed only when a probe changed what workers advertise. */
  private readonly defaultsCache = new Map<FormatName, SamplingDefaults>();

  constructor(
    private readonly workers: ReadonlyMap<string, Worker>,
    private readonly onChange: (w: Worker) => void,
  ) {}

  /** Workers joined or left: what was computed over them is stale. */
  stale(): void {
    this.defaultsCache.clear();
  }

  /** A probe found `w` speaking `format`: record what it serves. */
  probed(w: Worker, format: FormatName, probe: ProbeResult): void {
    if (JSON.stringify(probe.preferred) !== JSON.stringify(w.preferred) || !w.probed || w.format !== format) this.defaultsCache.clear();
    // A probe that could not tell the abort path keeps what an earlier one of the format found.
    if (probe.abortPath !== undefined || w.format !== format) w.abortPath = probe.abortPath;
    w.format = format;
    w.tokenOnly = probe.tokenOnly;
    w.incremental = probe.incremental;
    w.defaultMaxNewTokens = probe.defaultMaxNewTokens;
    w.preferred = probe.preferred;
    w.modelPath = probe.modelPath;
    w.weightVersion = probe.weightVersion;
    w.contextLength = probe.contextLength;
    w.maxTotalTokens = probe.maxTotalTokens;
    w.pageSize = probe.pageSize ?? null;
    w.streamInterval = probe.streamInterval ?? null;
    w.pdRole = w.declaredRole ?? probe.disaggregationMode ?? null;
    w.bootstrapPort = w.declaredBootstrapPort ?? probe.bootstrapPort ?? null;
    w.probed = true;
  }

  /**
   * The sampling defaults workers advertise (preferred_sampling_params), which SGLang merges under
   * each request's own. Admission treats an agreed default as if the client had sent it; a
   * default the workers disagree on makes whatever it governs unresolved.
   */
  samplingDefaults(format: FormatName = UNPROBED): SamplingDefaults {
    const cached = this.defaultsCache.get(format);
    if (cached) return cached;
    const probed = [...this.workers.values()].filter((w) => w.probed && speaks(w, format));
    let result = NO_DEFAULTS;
    if (probed.some((w) => w.preferred !== null)) {
      const keys = new Set<string>();
      for (const w of probed) for (const k of Object.keys(w.preferred ?? {})) keys.add(k);
      const agreed: Record<string, unknown> = {};
      const disputed = new Set<string>();
      for (const k of keys) {
        const values = probed.map((w) => (w.preferred && k in w.preferred ? JSON.stringify(w.preferred[k]) : undefined));
        if (values.every((v) => v !== undefined && v === values[0])) agreed[k] = probed[0]!.preferred![k];
        else disputed.add(k);
      }
      result = { agreed, disputed };
    }
    this.defaultsCache.set(format, result);
    return result;
  }

  /** The smallest scheduler bound on prompt + output among probed workers (null: none advertised). */
  maxReqLen(format: FormatName = UNPROBED): number | null {
    let min: number | null = null;
    for (const w of this.workers.values()) {
      const m = w.probed && speaks(w, format) ? w.maxReqLen() : null;
      if (m !== null && (min === null || m < min)) min = m;
    }
    return min;
  }

  /** An attempt's meta_info named the weights it ran on: the worker now serves those. */
  noteWeightVersion(w: Worker, version: string): void {
    if (w.weightVersion === version) return;
    w.weightVersion = version;
    this.onChange(w);
  }

  /** An attempt on `w` ended: count its prompt and cached tokens (the Workers view's hit rate). */
  noteCached(w: Worker, promptTokens: number, cachedTokens: number | null): void {
    if (cachedTokens === null || promptTokens <= 0) return;
    w.promptTokens += promptTokens;
    w.cachedTokens += Math.min(cachedTokens, promptTokens);
  }
}
