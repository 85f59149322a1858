// The load a worker reports itself, for policies that balance on it (cache_aware, power_of_two):
// it counts every router's requests, where the router's own in-flight count sees only its own.
// Where a format's workers report it and how it is read is the format's (WireFormat.load:
// formats/<name>/load.ts).
import type { Pool } from 'undici';
import type { FormatName } from '../core/types.ts';
import { formatNamed } from '../formats/registry.ts';

/** Requests running + waiting on the worker, as it reports them, or null (no answer, unknown shape). */
export async function readLoad(pool: Pool, format: FormatName, timeoutMs: number): Promise<number | null> {
  try {
    const report = formatNamed(format).load;
    if (report === undefined) return null;
    const res = await pool.request({ path: report.path, method: 'GET', signal: AbortSignal.timeout(timeoutMs) });
    if (res.statusCode !== 200) {
      await res.body.dump();
      return null;
    }
    return report.read(await res.body.text());
  } catch {
    return null;
  }
}
