// One router as the hub follows it: its /events stream (reopened with Last-Event-ID, so a
// reconnect loses nothing the router's replay ring still holds), its /stats polled for the
// figures and the clock offset, and its state (connected, lagging, lost) for the router strip.
import { request } from 'undici';
import type { BatonEvent, RouterStats } from '../../router/events/types.ts';
import type { EventEnvelope } from '../../router/http/events-endpoint.ts';
import type { RouterLinkState, RouterLinkStatus } from '../contract.ts';

export interface LinkTimings {
  /** The router's heartbeat asked for (GET /events?heartbeat_ms=): silence longer than this is news. */
  heartbeatMs: number;
  /** /stats is read this often. */
  statsMs: number;
  /** Silent this long (no event, heartbeat or /stats): lagging. */
  laggingMs: number;
  /** Silent this long, or the stream closed and not reopened: lost. */
  lostMs: number;
  /** Between attempts to reopen a closed stream. */
  retryMs: number;
}

export const DEFAULT_TIMINGS: LinkTimings = { heartbeatMs: 300, statsMs: 500, laggingMs: 1000, lostMs: 1500, retryMs: 250 };

export interface LinkHandlers {
  /** A message's events, in the router's order. */
  events(link: RouterLink, events: BatonEvent[]): void;
  /**
   * Rows may have ended unheard: the first stream opened (`start`: they ended before it), the
   * stream says what was missed is gone (`gap`), or the router is another life (`epoch`).
   */
  reset(link: RouterLink, reason: 'start' | 'gap' | 'epoch' | string): void;
  /** A /stats reading; `restarted` when its instance differs from the last one. */
  stats(link: RouterLink, stats: RouterStats, restarted: boolean): void;
  /** The state changed (the hub tells its pages through /api/live). */
  state(link: RouterLink, from: RouterLinkState, to: RouterLinkState): void;
}

interface Sample {
  rtt: number;
  offset: number;
}

/** SSE messages complete in `text`; returns the unfinished rest. */
export function sseSplit(text: string, onMessage: (id: string | null, data: string) => void): string {
  let rest = text;
  let cut: number;
  while ((cut = rest.indexOf('\n\n')) >= 0) {
    const message = rest.slice(0, cut);
    rest = rest.slice(cut + 2);
    let id: string | null = null;
    let data: string | null = null;
    for (const line of message.split('\n')) {
      if (line.startsWith('id:')) id = line.slice(line[3] === ' ' ? 4 : 3);
      else if (line.startsWith('data:')) data = (data === null ? '' : data + '\n') + line.slice(line[5] === ' ' ? 6 : 5);
    }
    if (data !== null) onMessage(id, data);
  }
  return rest;
}

/** The offset of the sample with the shortest round trip: the one least blurred by queueing (NTP's rule). */
export function bestOffset(samples: readonly Sample[]): Sample | null {
  let best: Sample | null = null;
  for (const s of samples) if (!best || s.rtt < best.rtt) best = s;
  return best;
}

export class RouterLink {
  state: RouterLinkState = 'connecting';
  instance: string | null = null;
  replica: RouterLinkStatus['replica'] = null;
  stats: RouterStats | null = null;
  epoch: number | null = null;
  seq = 0;
  lastSeen: number | null = null;
  events = 0;
  gaps = 0;
  reconnects = 0;
  error: string | null = null;
  private streamOpen = false;
  private everOpened = false;
  private samples: Sample[] = [];
  private stopped = false;
  private ac = new AbortController();
  private timers: NodeJS.Timeout[] = [];
  private streamDone: Promise<void> = Promise.resolve();
  private startedAt = Date.now();
  private holdUntil = 0;
  /** When the event stream last brought anything (a message or a heartbeat). */
  private lastStreamData = 0;

  constructor(
    readonly label: string,
    public url: string,
    private readonly handlers: LinkHandlers,
    private readonly timings: LinkTimings = DEFAULT_TIMINGS,
    private readonly headers: Record<string, string> = {},
  ) {}

  start(): void {
    this.startedAt = Date.now();
    this.streamDone = this.streamLoop();
    const poll = setInterval(() => void this.pollStats(), this.timings.statsMs);
    const watch = setInterval(() => this.judge(), Math.min(100, this.timings.heartbeatMs));
    poll.unref();
    watch.unref();
    this.timers.push(poll, watch);
    void this.pollStats();
  }

  /** Follow the router at another address (a replica restarted on another port); the stream reopens. */
  retarget(url: string): void {
    if (url === this.url) return;
    this.url = url;
    this.ac.abort();
  }

  /**
   * Drops the event stream and reopens it after `holdMs` with Last-Event-ID: what the router
   * emitted meanwhile comes from its replay ring (the scenario's forced reconnect).
   */
  reconnect(holdMs = 0): void {
    this.holdUntil = Date.now() + holdMs;
    this.ac.abort();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    this.ac.abort();
    await this.streamDone;
  }

  /** The router's clock minus the hub's, from the fastest recent /stats round trip. */
  offset(): Sample | null {
    return bestOffset(this.samples);
  }

  status(requests: number): RouterLinkStatus {
    const best = this.offset();
    return {
      label: this.label, url: this.url, state: this.state, instance: this.instance, replica: this.replica, epoch: this.epoch, seq: this.seq,
      last_seen: this.lastSeen, offset_ms: best ? Math.round(best.offset) : null, rtt_ms: best ? Math.round(best.rtt * 10) / 10 : null,
      events: this.events, gaps: this.gaps, reconnects: this.reconnects, requests, error: this.error,
    };
  }

  private heard(): void {
    this.lastSeen = Date.now();
  }

  private setState(to: RouterLinkState): void {
    if (to === this.state) return;
    const from = this.state;
    this.state = to;
    this.handlers.state(this, from, to);
  }

  /** The state from what was heard and whether the stream is open. */
  private judge(): void {
    if (this.stopped) return;
    const silent = this.lastSeen === null ? Infinity : Date.now() - this.lastSeen;
    if (!this.streamOpen) {
      if (Math.min(silent, Date.now() - this.startedAt) > this.timings.lostMs) this.setState('lost');
      return;
    }
    const streamSilent = Date.now() - this.lastStreamData;
    if (streamSilent > this.timings.lostMs) {
      // The stream open but silent past its heartbeats: a hung router, a dead peer that sent no
      // FIN, or a stream stuck somewhere between. Reopen it (Last-Event-ID: nothing is lost);
      // lost only when /stats is silent too.
      this.error = `no heartbeat on the event stream for ${streamSilent} ms`;
      this.setState(silent > this.timings.lostMs ? 'lost' : 'lagging');
      this.lastStreamData = Date.now();
      this.ac.abort();
    } else if (silent > this.timings.laggingMs || streamSilent > this.timings.laggingMs) this.setState('lagging');
    else this.setState('connected');
  }

  /** The router instance followed; another one's clock is another clock. */
  private noteInstance(instance: string): void {
    if (instance === this.instance) return;
    if (this.instance !== null) this.samples = this.samples.slice(-1);
    this.instance = instance;
  }

  private async pollStats(): Promise<void> {
    if (this.stopped) return;
    const t0 = performance.now();
    const wall0 = Date.now();
    try {
      const url = this.url;
      const res = await request(`${url}/stats`, { headers: this.headers, headersTimeout: this.timings.lostMs, bodyTimeout: this.timings.lostMs });
      if (res.statusCode !== 200) {
        await res.body.dump();
        throw new Error(`GET /stats: ${res.statusCode}`);
      }
      const stats = (await res.body.json()) as RouterStats & { replica?: { id: string; index: number; epoch: number } };
      // Followed elsewhere meanwhile (a replica's slot moved to its new process): a reading of the
      // old address says nothing of the router followed now.
      if (url !== this.url) return;
      const rtt = performance.now() - t0;
      this.heard();
      this.samples.push({ rtt, offset: stats.t - (wall0 + rtt / 2) });
      if (this.samples.length > 16) this.samples.shift();
      const restarted = this.instance !== null && stats.instance !== this.instance;
      this.noteInstance(stats.instance);
      if (stats.replica) this.replica = { id: stats.replica.id, index: stats.replica.index, epoch: stats.replica.epoch };
      this.stats = stats;
      this.handlers.stats(this, stats, restarted);
    } catch (err) {
      if (!this.streamOpen) this.error = (err as Error).message;
    }
  }

  private async streamLoop(): Promise<void> {
    while (!this.stopped) {
      this.ac = new AbortController();
      try {
        const headers: Record<string, string> = { ...this.headers, accept: 'text/event-stream' };
        if (this.epoch !== null) headers['last-event-id'] = `${this.epoch}:${this.seq}`;
        const res = await request(`${this.url}/events?heartbeat_ms=${this.timings.heartbeatMs}`, {
          headers, signal: this.ac.signal, headersTimeout: this.timings.lostMs, bodyTimeout: 0,
        });
        if (res.statusCode !== 200) {
          const text = await res.body.text().catch(() => '');
          throw new Error(`GET /events: ${res.statusCode} ${text.slice(0, 200)}`);
        }
        if (this.everOpened) this.reconnects++;
        this.everOpened = true;
        this.streamOpen = true;
        this.error = null;
        this.heard();
        this.lastStreamData = Date.now();
        this.judge();
        // A stream opened without Last-Event-ID (no message heard yet) carries what happens from
        // now on: what ended before is in /traces, read once the stream is open so that nothing
        // falls between the two.
        if (this.epoch === null) this.handlers.reset(this, 'start');
        let rest = '';
        for await (const chunk of res.body) {
          this.heard();
          this.lastStreamData = Date.now();
          rest = sseSplit(rest + (chunk as Buffer).toString('utf8'), (_id, data) => this.message(data));
        }
        this.error = 'the router closed its event stream';
      } catch (err) {
        if (!this.stopped) this.error = (err as Error).message;
        // Refused: nothing listens there now (a killed process). No need to wait out the silence.
        if (!this.streamOpen && (err as NodeJS.ErrnoException).code === 'ECONNREFUSED') this.setState('lost');
      }
      this.streamOpen = false;
      if (this.stopped) return;
      this.judge();
      await new Promise((r) => setTimeout(r, Math.max(this.timings.retryMs, this.holdUntil - Date.now())));
    }
  }

  private message(data: string): void {
    let env: EventEnvelope;
    try {
      env = JSON.parse(data) as EventEnvelope;
    } catch {
      this.gaps++; // a message we cannot read is a message lost
      return;
    }
    if (Array.isArray(env)) {
      // A router older than the envelope: events without sequence numbers.
      this.events += (env as unknown[]).length;
      this.handlers.events(this, env as BatonEvent[]);
      return;
    }
    // The stream names the router it comes from: a new one (a restart, a replica's new process)
    // has already said `reset: epoch` here, so a /stats reading of it later is no restart.
    if (typeof env.router === 'string' && env.router !== '') this.noteInstance(env.router);
    if (env.reset !== undefined) {
      if (env.reset === 'gap') this.gaps++;
      this.epoch = env.epoch;
      this.seq = env.seq;
      this.handlers.reset(this, env.reset);
      return;
    }
    if (this.epoch === env.epoch && env.from > this.seq + 1) this.gaps += env.from - this.seq - 1;
    // Handed over first, then counted as received: a handler that throws (and so ends this
    // stream) leaves the sequence where it was, and the reopened stream sends these again.
    if (env.events.length > 0) this.handlers.events(this, env.events as BatonEvent[]);
    this.epoch = env.epoch;
    this.seq = env.seq;
    this.events += env.events.length;
  }
}
