// The two themes' colour variables as styles.css defines them, for tests that hold colours to
// contrast against the theme they are drawn on.
import { readFileSync } from 'node:fs';

/** A theme block's variables in styles.css: the first rule whose selector matches. */
export function themeVars(selector: string): Map<string, string> {
  const css = readFileSync(new URL('../../renderer/src/styles.css', import.meta.url), 'utf8');
  const at = css.indexOf(selector);
  if (at < 0) throw new Error(`no ${selector} in styles.css`);
  const body = css.slice(css.indexOf('{', at) + 1, css.indexOf('}', at));
  return new Map([...body.matchAll(/(--[\w-]+):\s*([^;]+);/g)].map((m) => [m[1]!, m[2]!.trim()]));
}
export const THEMES = { light: themeVars(':root {'), dark: themeVars(":root[data-theme='dark'] {") };
