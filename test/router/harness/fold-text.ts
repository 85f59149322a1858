// Folding a raw /generate answer (unary JSON or SSE text) into one answer object.
import { fold } from './setup.ts';

export interface Folded {
  status: number;
  body: Record<string, unknown> | null;
  error: string | null;
  frames: Record<string, unknown>[];
  headers: Headers;
}

export function foldText(status: number, headers: Headers, text: string, stream: boolean, incremental: boolean): Folded {
  if (!stream || !headers.get('content-type')?.includes('text/event-stream')) {
    const json = text ? (JSON.parse(text) as Record<string, unknown>) : null;
    const err = json && typeof json.error === 'object' && json.error !== null ? (json.error as { message: string }).message : null;
    return { status, body: err ? null : json, error: err, frames: [], headers };
  }
  if (!text.endsWith('data: [DONE]\n\n')) throw new Error(`stream did not end with [DONE]: ...${text.slice(-200)}`);
  const frames = text.split('\n\n').filter((f) => f && f !== 'data: [DONE]').map((f) => {
    if (!f.startsWith('data: ')) throw new Error(`not an SGLang frame: ${f.slice(0, 80)}`);
    return JSON.parse(f.slice(6)) as Record<string, unknown>;
  });
  const last = frames.at(-1);
  if (last && 'error' in last) return { status, body: null, error: (last.error as { message: string }).message, frames, headers };
  return { status, body: fold(frames, incremental), error: null, frames, headers };
}
