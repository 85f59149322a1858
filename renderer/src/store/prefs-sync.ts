// Preferences across ports: the page keeps them in localStorage (keyed by origin, so a new port
// starts without them) and mirrors every change to the host (`PUT /api/prefs`, host/prefs.ts);
// at start the host's copy, the latest any page saved, is applied over the local one.
import { REQUEST_WINDOWS, type DashStore, type Theme } from './store.ts';

export interface PrefsHost {
  prefs?(): Promise<Record<string, unknown> | null>;
  savePrefs?(prefs: Record<string, unknown>): Promise<void>;
}

/** localStorage that also hands the dashboard's preferences to the host. */
export function hostBackedStorage(local: Pick<Storage, 'getItem' | 'setItem'> | null, host: PrefsHost, key = 'baton.prefs'): Pick<Storage, 'getItem' | 'setItem'> {
  return {
    getItem: (k) => local?.getItem(k) ?? null,
    setItem: (k, value) => {
      try {
        local?.setItem(k, value);
      } finally {
        if (k === key && host.savePrefs) {
          try {
            void host.savePrefs(JSON.parse(value) as Record<string, unknown>).catch(() => {});
          } catch {
            // not JSON: nothing to mirror
          }
        }
      }
    },
  };
}

/** Applies the host's preferences where they are valid and differ from the page's. */
export function applyHostPrefs(store: DashStore, prefs: Record<string, unknown> | null): void {
  if (!prefs) return;
  const s = store.getState();
  const { requestWindow, chartWindow, theme } = prefs;
  if (typeof requestWindow === 'number' && (REQUEST_WINDOWS as readonly number[]).includes(requestWindow) && requestWindow !== s.requestWindow) s.setRequestWindow(requestWindow);
  if (typeof chartWindow === 'number' && Number.isInteger(chartWindow) && chartWindow >= 0 && chartWindow <= 2 && chartWindow !== s.chartWindow) s.setChartWindow(chartWindow);
  if ((theme === 'system' || theme === 'light' || theme === 'dark') && theme !== s.theme) s.setTheme(theme as Theme);
}

/** Reads the host's preferences once and applies them. */
export async function syncPrefs(store: DashStore, host: PrefsHost): Promise<void> {
  if (!host.prefs) return;
  try {
    applyHostPrefs(store, await host.prefs());
  } catch {
    // an older host, or none answering yet: the page's own preferences stand
  }
}
