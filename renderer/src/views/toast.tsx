// Errors from host actions (a refused URL, a worker that is gone) and short confirmations
// ("Copied") as a short-lived toast.
import { useEffect } from 'react';
import { create } from 'zustand';

interface ToastState { message: string | null; kind: 'error' | 'info'; show(message: string, kind?: 'error' | 'info'): void; clear(): void }

const useToastStore = create<ToastState>()((set) => ({
  message: null,
  kind: 'error',
  show: (message, kind = 'error') => set({ message, kind }),
  clear: () => set({ message: null }),
}));

export const showError = (err: unknown) => useToastStore.getState().show(err instanceof Error ? err.message : String(err));
export const showInfo = (message: string) => useToastStore.getState().show(message, 'info');

export function Toast() {
  const { message, kind, clear } = useToastStore();
  useEffect(() => {
    if (!message) return;
    const id = setTimeout(clear, kind === 'info' ? 2000 : 6000);
    return () => clearTimeout(id);
  }, [message, kind, clear]);
  if (!message) return null;
  return <div className={`toast ${kind}`} role={kind === 'error' ? 'alert' : 'status'} data-testid="toast" onClick={clear}>{message}</div>;
}
