// The embedded traffic generator: real /generate requests to the router, so a newcomer sees live
// attempts and migrations at once. Open-loop at `rate` per second, bounded by `concurrency`.
import { randomUUID } from 'node:crypto';
import { Agent, request } from 'undici';
import type { TrafficSettings, TrafficStatus } from './contract.ts';
import { DEFAULT_TRAFFIC, mergeTraffic } from './traffic-settings.ts';
import { generateRequest, toOpenAiChat, toVllm } from './traffic-request.ts';

export interface TrafficOptions {
  /** The router's base URL (http://host:port). */
  url: string;
  settings?: Partial<TrafficSettings>;
  random?: () => number;
  tickMs?: number;
  /** How many recent request bodies to keep for "copy as curl" (default 5000). */
  keepBodies?: number;
  /** The wire formats to send, chosen per request (default SGLang only); openai: chat completions. */
  formats?: TrafficFormat[];
}

export type TrafficFormat = 'sglang' | 'vllm' | 'openai';

export class TrafficGenerator {
  private settings: TrafficSettings;
  private readonly target: string;
  private readonly vllmTarget: string;
  private readonly openaiTarget: string;
  private readonly formats: TrafficFormat[];
  private readonly random: () => number;
  private readonly agent = new Agent({ keepAliveTimeout: 10_000, bodyTimeout: 120_000, headersTimeout: 60_000 });
  private readonly inFlight = new Map<AbortController, Promise<void>>();
  private readonly timer: ReturnType<typeof setInterval>;
  private lastTick = performance.now();
  private credit = 0;
  private counters = { sent: 0, ok: 0, failed: 0 };
  private stopped = false;
  /** The bodies of the last requests sent and the router path each went to, by request id, for "copy as curl". */
  private readonly bodies = new Map<string, { body: unknown; path: string }>();
  private readonly keepBodies: number;

  constructor(opts: TrafficOptions) {
    this.target = new URL('/generate', opts.url).toString();
    this.vllmTarget = new URL('/inference/v1/generate', opts.url).toString();
    this.openaiTarget = new URL('/v1/chat/completions', opts.url).toString();
    this.formats = opts.formats && opts.formats.length > 0 ? opts.formats : ['sglang'];
    this.settings = mergeTraffic(DEFAULT_TRAFFIC, opts.settings ?? {});
    this.random = opts.random ?? Math.random;
    this.keepBodies = opts.keepBodies ?? 5000;
    this.timer = setInterval(() => this.tick(), opts.tickMs ?? 50);
    // The server keeps the process alive; a forgotten generator alone must not.
    this.timer.unref();
  }

  status(): TrafficStatus {
    return { settings: { ...this.settings }, inFlight: this.inFlight.size, ...this.counters };
  }

  /** The body of a request this generator sent (by the id it gave it), while kept. */
  body(requestId: string): unknown {
    return this.bodies.get(requestId)?.body;
  }

  /** The router path a kept request was posted to (/generate, /inference/v1/generate, /v1/chat/completions). */
  path(requestId: string): string | undefined {
    return this.bodies.get(requestId)?.path;
  }

  update(patch: Partial<TrafficSettings>): TrafficStatus {
    this.settings = mergeTraffic(this.settings, patch);
    return this.status();
  }

  /** Stops sending, aborts what is in flight and waits for it to settle. Idempotent. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    for (const controller of this.inFlight.keys()) controller.abort();
    await Promise.allSettled([...this.inFlight.values()]);
    await this.agent.destroy().catch(() => {});
  }

  private tick(): void {
    const now = performance.now();
    const elapsed = (now - this.lastTick) / 1000;
    this.lastTick = now;
    if (this.stopped || !this.settings.running) {
      this.credit = 0;
      return;
    }
    // Credit is capped so a pause, a full concurrency window or a slow event loop does not turn
    // into a burst of requests afterwards.
    this.credit = Math.min(this.credit + this.settings.rate * elapsed, Math.max(1, this.settings.rate * 0.25));
    while (this.credit >= 1 && this.inFlight.size < this.settings.concurrency) {
      this.credit -= 1;
      this.launch();
    }
  }

  private launch(): void {
    const generated = generateRequest(this.settings, this.random).body;
    const format = this.formats[Math.floor(this.random() * this.formats.length)]!;
    const body = format === 'vllm' ? toVllm(generated) : format === 'openai' ? toOpenAiChat(generated) : generated;
    const target = format === 'vllm' ? this.vllmTarget : format === 'openai' ? this.openaiTarget : this.target;
    const controller = new AbortController();
    this.counters.sent += 1;
    // The id travels as x-request-id (the router takes it when the body has no rid), so the body
    // can be found again by the id the dashboard shows, and a replay gets an id of its own.
    const id = randomUUID().replace(/-/g, '');
    this.bodies.set(id, { body, path: new URL(target).pathname });
    if (this.bodies.size > this.keepBodies) this.bodies.delete(this.bodies.keys().next().value!);
    const done = this.send(target, JSON.stringify(body), id, controller.signal)
      .then((ok) => { this.counters[ok ? 'ok' : 'failed'] += 1; })
      .catch(() => { if (!this.stopped) this.counters.failed += 1; })
      .finally(() => { this.inFlight.delete(controller); });
    this.inFlight.set(controller, done);
  }

  private async send(target: string, body: string, id: string, signal: AbortSignal): Promise<boolean> {
    const res = await request(target, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': id },
      body,
      signal,
      dispatcher: this.agent,
    });
    // Read the whole answer (the router only finishes a request whose client keeps reading);
    // an in-band error frame on a stream counts as a failure too.
    const text = await res.body.text();
    return res.statusCode === 200 && !text.includes('data: {"error"');
  }
}
