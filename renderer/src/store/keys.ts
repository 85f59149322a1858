// The page's single-key commands, decided away from the DOM so they can be tested: which view a
// digit or letter opens, `?` for the list of keys, `n` / `N` to step through the incidents, `/`
// for the search, `Esc`. A key typed into a text field, or with Ctrl, Alt or Meta held (a browser
// or system shortcut), is never a command.
import type { View } from './store.ts';

export type KeyCommand =
  | { kind: 'view'; view: View }
  | { kind: 'help' }
  | { kind: 'incident'; step: 1 | -1 }
  | { kind: 'search' }
  | { kind: 'escape' };

export interface KeyInput {
  key: string;
  ctrlKey?: boolean;
  altKey?: boolean;
  metaKey?: boolean;
}

/** The view keys, in the header's order: a digit (its place) or its letter. */
export const VIEW_KEYS: { view: View; digit: string; letter: string; label: string }[] = [
  { view: 'live', digit: '1', letter: 'l', label: 'Requests (live)' },
  { view: 'workers', digit: '2', letter: 'w', label: 'Workers' },
  { view: 'charts', digit: '3', letter: 'c', label: 'Charts' },
  { view: 'traces', digit: '4', letter: 't', label: 'Traces' },
  { view: 'traffic', digit: '5', letter: 'r', label: 'Traffic' },
];

/** What the `?` overlay lists: the keys, and what each does. */
export const KEY_HELP: [string, string][] = [
  ...VIEW_KEYS.map((v): [string, string] => [`${v.digit} or ${v.letter}`, v.label]),
  ['n / N', 'next / previous incident: focus the Requests list on it'],
  ['/', 'search request ids (Requests) or trace id prefixes (Traces)'],
  ['j / k', 'move the cursor down / up the Requests list or the Traces table'],
  ['Enter', 'open the request under the cursor'],
  ['Esc', 'close a hover card, the request panel, a dialog or this list'],
  ['?', 'show or hide this list'],
];

/** Whether a key event's target takes text: there a key is typing, not a command. */
export function isTyping(target: unknown): boolean {
  if (!target || typeof target !== 'object') return false;
  const el = target as { tagName?: unknown; isContentEditable?: unknown; type?: unknown };
  if (el.isContentEditable === true) return true;
  const tag = typeof el.tagName === 'string' ? el.tagName.toUpperCase() : '';
  if (tag === 'TEXTAREA' || tag === 'SELECT') return true;
  if (tag !== 'INPUT') return false;
  // A checkbox or a button takes no text: a view key there is still a command.
  const type = typeof el.type === 'string' ? el.type.toLowerCase() : 'text';
  return !['checkbox', 'radio', 'button', 'submit', 'reset', 'range', 'color', 'file'].includes(type);
}

/**
 * The command a key is, or null. `views` are the views this page offers (a trace file has no
 * Traffic): a key for another view is no command.
 */
export function keyCommand(e: KeyInput, typing: boolean, views: readonly View[]): KeyCommand | null {
  if (typing || e.ctrlKey || e.altKey || e.metaKey) return null;
  if (e.key === 'Escape') return { kind: 'escape' };
  if (e.key === '?') return { kind: 'help' };
  if (e.key === '/') return { kind: 'search' };
  if (e.key === 'n') return { kind: 'incident', step: 1 };
  if (e.key === 'N') return { kind: 'incident', step: -1 };
  const v = VIEW_KEYS.find((k) => k.digit === e.key || k.letter === e.key);
  return v && views.includes(v.view) ? { kind: 'view', view: v.view } : null;
}

/**
 * The incident `n` (step 1) or `N` (step -1) focuses, in the strip's order (newest first): from
 * the focused one to its neighbour, wrapping at the ends; with none focused (or the focused one
 * gone), `n` takes the newest and `N` the oldest. `incidents` are oldest first, as derived.
 */
export function stepIncident<T extends { id: string }>(incidents: readonly T[], focusedId: string | null, step: 1 | -1): T | null {
  if (incidents.length === 0) return null;
  const strip = [...incidents].reverse();
  const at = focusedId === null ? -1 : strip.findIndex((i) => i.id === focusedId);
  if (at < 0) return step === 1 ? strip[0]! : strip[strip.length - 1]!;
  return strip[(at + step + strip.length) % strip.length]!;
}
