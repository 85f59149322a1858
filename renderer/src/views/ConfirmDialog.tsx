// Destructive actions (kill, hang, reset, reject, remove) always ask first.
import { useEffect, useRef } from 'react';

export interface PendingConfirm {
  title: string;
  body: string;
  action: string;
  run(): void;
}

export function ConfirmDialog({ pending, onClose }: { pending: PendingConfirm; onClose(): void }) {
  const cancelRef = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    // Focus Cancel, not OK: an accidental Enter must not kill a worker.
    cancelRef.current?.focus();
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') {
        e.stopPropagation();
        onClose();
      }
    };
    window.addEventListener('keydown', onKey, true);
    return () => window.removeEventListener('keydown', onKey, true);
  }, [onClose]);
  return (
    <div className="modal-back" onClick={onClose}>
      <div className="modal" role="alertdialog" aria-modal="true" aria-labelledby="confirm-title" data-testid="confirm-dialog" onClick={(e) => e.stopPropagation()}>
        <strong id="confirm-title">{pending.title}</strong>
        <span>{pending.body}</span>
        <div className="buttons">
          <button ref={cancelRef} onClick={onClose} data-testid="confirm-cancel">Cancel</button>
          <button className="primary" data-testid="confirm-ok" onClick={() => { onClose(); pending.run(); }}>{pending.action}</button>
        </div>
      </div>
    </div>
  );
}
