// The dashboard's preferences (the waterfall's and the charts' windows, the theme), kept by the
// host in a small JSON file, so that they survive a new port: the page's localStorage is keyed
// by origin (scheme, host and port), and `baton serve --port 0` or a second instance is a new one.
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { HostError } from './host-error.ts';

export interface DashboardPrefs {
  requestWindow?: number;
  chartWindow?: number;
  theme?: 'system' | 'light' | 'dark';
}

/** BATON_PREFS_FILE, else $XDG_CONFIG_HOME/baton/dashboard-prefs.json (~/.config when unset). */
export function defaultPrefsFile(env: NodeJS.ProcessEnv = process.env): string {
  if (env.BATON_PREFS_FILE) return env.BATON_PREFS_FILE;
  return join(env.XDG_CONFIG_HOME || join(homedir(), '.config'), 'baton', 'dashboard-prefs.json');
}

/** What is well-formed in a value (the rest ignored); throws on a value that is not an object. */
export function parsePrefs(value: unknown): DashboardPrefs {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new HostError(400, 'preferences must be a JSON object');
  const v = value as Record<string, unknown>;
  const out: DashboardPrefs = {};
  if (typeof v.requestWindow === 'number' && Number.isFinite(v.requestWindow) && v.requestWindow > 0) out.requestWindow = v.requestWindow;
  if (typeof v.chartWindow === 'number' && Number.isInteger(v.chartWindow) && v.chartWindow >= 0 && v.chartWindow <= 10) out.chartWindow = v.chartWindow;
  if (v.theme === 'system' || v.theme === 'light' || v.theme === 'dark') out.theme = v.theme;
  return out;
}

export class PrefsFile {
  constructor(readonly path: string) {}

  /** The saved preferences; none when the file is missing or unreadable (a first start). */
  async read(): Promise<DashboardPrefs> {
    try {
      return parsePrefs(JSON.parse(await readFile(this.path, 'utf8')));
    } catch {
      return {};
    }
  }

  /** Merges a patch into the saved preferences (written whole, through a rename). */
  async update(patch: unknown): Promise<DashboardPrefs> {
    const next = { ...(await this.read()), ...parsePrefs(patch) };
    try {
      await mkdir(dirname(this.path), { recursive: true });
      const tmp = `${this.path}.${process.pid}.tmp`;
      await writeFile(tmp, JSON.stringify(next) + '\n');
      await rename(tmp, this.path);
    } catch (err) {
      throw new HostError(500, `could not save the preferences to ${this.path}: ${(err as Error).message}`);
    }
    return next;
  }
}
