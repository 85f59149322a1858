// Errors from host actions (a refused URL, a worker that is gone) as a short-lived toast.
import { useEffect } from 'react';
import { create } from 'zustand';

const useToastStore = create<{ message: string | null; show(message: string): void; clear(): void }>()((set) => ({
  message: null,
  show: (message) => set({ message }),
  clear: () => set({ message: null }),
}));

export const showError = (err: unknown) => useToastStore.getState().show(err instanceof Error ? err.message : String(err));

export function Toast() {
  const { message, clear } = useToastStore();
  useEffect(() => {
    if (!message) return;
    const id = setTimeout(clear, 6000);
    return () => clearTimeout(id);
  }, [message, clear]);
  if (!message) return null;
  return <div className="toast" role="alert" data-testid="toast" onClick={clear}>{message}</div>;
}
