// What each allowlisted IPC channel does, over the host's actions. No Electron import: app.ts
// registers these with ipcMain after checking the sender and the arguments (policy.ts).
import type {
  ExportFilter, ExportFormat, ExportResult, HostActions, RequestOutput, SimAction, TrafficSettings, TraceFileContext,
} from '../host/contract.ts';
import type { InvokeChannel } from './policy.ts';

export type Exporter = (format: ExportFormat, filter: ExportFilter, context?: TraceFileContext) => Promise<ExportResult>;
/** The router's memory of recent outputs (RouterHandle.requestOutput), as in browser mode's GET /requests/:id/output. */
export type OutputReader = (id: string) => RequestOutput | null | undefined | Promise<RequestOutput | null>;

/** The router's GET /config/ui, read by the main process (the page cannot reach the router's port). */
export type UiConfigReader = () => Promise<unknown>;

export function ipcHandlers(actions: HostActions, exportTraces: Exporter, requestOutput: OutputReader, uiConfig: UiConfigReader = async () => null): Record<InvokeChannel, (...args: unknown[]) => unknown> {
  return {
    'baton:snapshot': () => actions.snapshot(),
    'baton:sim-workers': () => actions.simWorkers(),
    'baton:sim-action': (index, action) => actions.simAction(index as number, action as SimAction),
    'baton:add-worker': (url) => actions.addWorker(url as string),
    'baton:remove-worker': (id) => actions.removeWorker(id as string),
    'baton:drain-worker': (id, draining) => actions.drainWorker(id as string, draining as boolean),
    'baton:traffic': () => actions.traffic(),
    'baton:set-traffic': (patch) => actions.setTraffic(patch as Partial<TrafficSettings>),
    'baton:export-traces': (format, filter, context) => exportTraces(format as ExportFormat, filter as ExportFilter, context as TraceFileContext | undefined),
    // null, not undefined, so the page gets the same answer as the browser host's 404.
    'baton:request-output': (id) => requestOutput(id as string) ?? null,
    'baton:live': () => actions.live?.() ?? null,
    'baton:trace-rows': (id) => actions.traceRows?.(id as string) ?? [],
    'baton:request-body': (id) => actions.requestBody?.(id as string) ?? null,
    'baton:ui-config': () => uiConfig(),
  };
}
