// `--compare-ref REV`: Baton as built at another commit, run as a second Baton target beside this
// checkout's, so that the two builds' CPU ratios come from the same run, against the same bare
// proxy and nginx, at the same moments (a no-regression check measured side by side; runs minutes
// apart on a shared machine differ by more than the 5 % it has to see).
//
// The build is a temporary `git worktree` of REV outside the repository (under the OS temp dir),
// detached, with `node_modules` a symlink to this checkout's: nothing is installed, built or
// committed there, and it is removed when the bench ends (also on Ctrl-C; a bench killed outright
// leaves it, and `git worktree prune` forgets it once its directory is gone).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BatonRefName } from './targets.ts';

/** This checkout: the repository the worktree is made from. */
export const REPO_DIR = fileURLToPath(new URL('..', import.meta.url));

export interface RefBuild {
  /** As given on the command line. */
  rev: string;
  /** The commit it names. */
  sha: string;
  /** Its target name: `baton@<7 hex>`. */
  name: BatonRefName;
  /** The worktree. */
  dir: string;
  /** Its bin/baton.js. */
  bin: string;
  /** Removes the worktree (idempotent). */
  remove(): void;
}

/** The target name of the build of commit `sha`. */
export function refTargetName(sha: string): BatonRefName {
  if (!/^[0-9a-f]{7,40}$/.test(sha)) throw new Error(`not a commit hash: '${sha}'`);
  return `baton@${sha.slice(0, 7)}`;
}

/** The revisions of `--compare-ref`: comma-separated, each once, in the order given. */
export function parseRefs(value: string | undefined): string[] {
  if (value === undefined) return [];
  const refs = value.split(',').map((s) => s.trim()).filter(Boolean);
  // A revision is anything git names a commit by, but never an option (it goes on git's command line).
  const bad = refs.filter((r) => r.startsWith('-') || /\s/.test(r));
  if (refs.length === 0 || bad.length > 0) throw new Error(`--compare-ref takes comma-separated git revisions, got '${value}'`);
  return [...new Set(refs)];
}

function git(args: string[], cwd: string): string {
  const r = spawnSync('git', args, { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${(r.stderr || r.stdout || `exit ${r.status}`).trim()}`);
  return r.stdout.trim();
}

/** A worktree of `rev` under the temp dir, with this checkout's node_modules, ready to run. */
export function prepareRef(rev: string, repo = REPO_DIR): RefBuild {
  const sha = git(['rev-parse', '--verify', '--end-of-options', `${rev}^{commit}`], repo);
  const name = refTargetName(sha);
  const parent = mkdtempSync(join(tmpdir(), `baton-bench-ref-${sha.slice(0, 7)}-`));
  const dir = join(parent, 'baton');
  let added = false;
  const remove = () => {
    // The symlink first: the worktree's removal must never reach into this checkout's node_modules.
    const link = join(dir, 'node_modules');
    try {
      unlinkSync(link);
    } catch {
      // Not made yet, or gone.
    }
    if (added) {
      try {
        git(['worktree', 'remove', '--force', dir], repo);
      } catch {
        // Already gone; prune below forgets it.
      }
      added = false;
      spawnSync('git', ['worktree', 'prune'], { cwd: repo });
    }
    rmSync(parent, { recursive: true, force: true });
  };
  try {
    git(['worktree', 'add', '--detach', dir, sha], repo);
    added = true;
    symlinkSync(join(repo, 'node_modules'), join(dir, 'node_modules'), 'dir');
    const bin = join(dir, 'bin', 'baton.js');
    if (!existsSync(bin)) throw new Error(`${rev} (${sha.slice(0, 7)}) has no bin/baton.js`);
    return { rev, sha, name, dir, bin, remove };
  } catch (err) {
    remove();
    throw err;
  }
}
