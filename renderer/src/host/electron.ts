// Electron's host: the preload script's `window.api` (contextBridge), one method per allowlisted
// IPC channel. Events arrive in batches the main process flushes a few times per second.
import type { BatonBridge } from '../../../electron/bridge-api.ts';
import type { ExportFilter, ExportFormat, SimAction, TraceFileContext, TrafficSettings } from '../../../host/contract.ts';
import { CatchUp } from './catch-up.ts';
import type { DashboardHost, FeedHandlers } from './types.ts';

export class ElectronHost implements DashboardHost {
  readonly kind = 'electron' as const;
  private unsubscribe: (() => void) | null = null;
  private handlers: FeedHandlers | null = null;

  constructor(private readonly api: BatonBridge) {}

  connect(handlers: FeedHandlers): () => void {
    this.handlers = handlers;
    this.open();
    return () => this.close();
  }

  retry(): void {
    this.close();
    this.open();
  }

  private open(): void {
    const handlers = this.handlers;
    if (!handlers) return;
    handlers.onStatus({ status: 'connecting', message: null });
    const catchUp = new CatchUp(handlers);
    const off = this.api.onEvents((events) => catchUp.events(events));
    // Events were dropped in the main process: catch up again from a fresh snapshot.
    const offResync = this.api.onResync(() => void catchUp.begin(() => this.api.snapshot()));
    this.unsubscribe = () => {
      catchUp.cancel();
      off();
      offResync();
    };
    void catchUp.begin(() => this.api.snapshot());
  }

  private close(): void {
    this.unsubscribe?.();
    this.unsubscribe = null;
  }

  simWorkers = () => this.api.simWorkers();
  simAction = (index: number, action: SimAction) => this.api.simAction(index, action);
  addWorker = (url: string) => this.api.addWorker(url);
  removeWorker = async (id: string) => void (await this.api.removeWorker(id));
  drainWorker = async (id: string, draining: boolean) => void (await this.api.drainWorker(id, draining));
  traffic = () => this.api.traffic();
  setTraffic = (patch: Partial<TrafficSettings>) => this.api.setTraffic(patch);
  exportTraces = (format: ExportFormat, filter: ExportFilter, _onProgress?: unknown, context?: TraceFileContext) => this.api.exportTraces(format, filter, context);
  requestOutput = (id: string) => this.api.requestOutput(id);
  live = () => this.api.live();
  traceRows = (id: string) => this.api.traceRows(id);
  requestBody = (id: string) => this.api.requestBody(id);
  uiConfig = () => this.api.uiConfig();
}
