// The host and the store, handed to every view through React context.
import { createContext, useContext } from 'react';
import { useStore } from 'zustand';
import type { DashboardHost } from '../host/types.ts';
import type { DashState, DashStore } from '../store/store.ts';

export interface Dash {
  host: DashboardHost;
  store: DashStore;
}

export const DashContext = createContext<Dash | null>(null);

function useDashContext(): Dash {
  const dash = useContext(DashContext);
  if (!dash) throw new Error('DashContext missing');
  return dash;
}

export function useDash<T>(selector: (s: DashState) => T): T {
  return useStore(useDashContext().store, selector);
}

export function useHost(): DashboardHost {
  return useDashContext().host;
}

export function useStoreApi(): DashStore {
  return useDashContext().store;
}

/** Re-renders about once a second (charts and rates do not need more). */
export function useSecond(): number {
  return useDash((s) => Math.floor(s.now / 1000));
}
