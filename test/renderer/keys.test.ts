// The page's single-key commands: view keys, `?`, `n` / `N` through the incidents, and none of
// them while a text field has the focus.
import { describe, expect, it } from 'vitest';
import { isTyping, keyCommand, KEY_HELP, stepIncident } from '../../renderer/src/store/keys.ts';
import type { View } from '../../renderer/src/store/store.ts';

const ALL: View[] = ['live', 'workers', 'charts', 'traces', 'traffic'];

describe('keys', () => {
  it('a digit or a letter opens each view', () => {
    expect(keyCommand({ key: '1' }, false, ALL)).toEqual({ kind: 'view', view: 'live' });
    expect(keyCommand({ key: 'l' }, false, ALL)).toEqual({ kind: 'view', view: 'live' });
    expect(keyCommand({ key: '2' }, false, ALL)).toEqual({ kind: 'view', view: 'workers' });
    expect(keyCommand({ key: 'w' }, false, ALL)).toEqual({ kind: 'view', view: 'workers' });
    expect(keyCommand({ key: 'c' }, false, ALL)).toEqual({ kind: 'view', view: 'charts' });
    expect(keyCommand({ key: '4' }, false, ALL)).toEqual({ kind: 'view', view: 'traces' });
    expect(keyCommand({ key: 'r' }, false, ALL)).toEqual({ kind: 'view', view: 'traffic' });
  });

  it('a view the page does not offer (Traffic in a trace file) is no command', () => {
    expect(keyCommand({ key: '5' }, false, ['live', 'workers', 'charts', 'traces'])).toBeNull();
  });

  it('? is help, n / N step through the incidents', () => {
    expect(keyCommand({ key: '?' }, false, ALL)).toEqual({ kind: 'help' });
    expect(keyCommand({ key: 'n' }, false, ALL)).toEqual({ kind: 'incident', step: 1 });
    expect(keyCommand({ key: 'N' }, false, ALL)).toEqual({ kind: 'incident', step: -1 });
    expect(KEY_HELP.map(([k]) => k)).toEqual(expect.arrayContaining(['1 or l', 'n / N', '?', '/']));
  });

  it('no key is a command while typing, nor with Ctrl, Alt or Meta held', () => {
    for (const key of ['1', 'w', 'n', 'N', '?', '/', 'Escape']) expect(keyCommand({ key }, true, ALL)).toBeNull();
    expect(keyCommand({ key: 'r', ctrlKey: true }, false, ALL)).toBeNull();
    expect(keyCommand({ key: '1', altKey: true }, false, ALL)).toBeNull();
    expect(keyCommand({ key: 'c', metaKey: true }, false, ALL)).toBeNull();
  });

  it('a text field, a text area, a select or an editable element is typing; a checkbox or a button is not', () => {
    expect(isTyping({ tagName: 'INPUT', type: 'text' })).toBe(true);
    expect(isTyping({ tagName: 'INPUT', type: 'url' })).toBe(true);
    expect(isTyping({ tagName: 'TEXTAREA' })).toBe(true);
    expect(isTyping({ tagName: 'SELECT' })).toBe(true);
    expect(isTyping({ tagName: 'DIV', isContentEditable: true })).toBe(true);
    expect(isTyping({ tagName: 'INPUT', type: 'checkbox' })).toBe(false);
    expect(isTyping({ tagName: 'BUTTON' })).toBe(false);
    expect(isTyping(null)).toBe(false);
  });

  it('n walks the strip newest first and wraps; N walks back; with none focused n takes the newest, N the oldest', () => {
    const incidents = [{ id: 'a' }, { id: 'b' }, { id: 'c' }]; // oldest first, as derived
    expect(stepIncident(incidents, null, 1)?.id).toBe('c');
    expect(stepIncident(incidents, null, -1)?.id).toBe('a');
    expect(stepIncident(incidents, 'c', 1)?.id).toBe('b');
    expect(stepIncident(incidents, 'b', 1)?.id).toBe('a');
    expect(stepIncident(incidents, 'a', 1)?.id).toBe('c');
    expect(stepIncident(incidents, 'c', -1)?.id).toBe('a');
    expect(stepIncident(incidents, 'gone', 1)?.id).toBe('c');
    expect(stepIncident([], null, 1)).toBeNull();
  });
});
