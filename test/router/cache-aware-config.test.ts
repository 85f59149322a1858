// cache_aware's settings: flag, env and YAML as every other setting, each bad value refused with
// where it came from.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../router/config.ts';

describe('cache_aware settings', () => {
  it('come from YAML, env and flags, in rising precedence, with fractions where the gateway has them', () => {
    const dir = mkdtempSync(join(tmpdir(), 'baton-ca-'));
    try {
      const file = join(dir, 'b.yaml');
      writeFileSync(file, 'policy: cache_aware\ncache_threshold: 0.5\nbalance_abs_threshold: 8\nbalance_rel_threshold: 1.25\nmax_tree_size: 4096\ncontinuation_placement: false\nload_interval_ms: 250\n');
      const c = loadConfig({ file, env: { BATON_BALANCE_ABS_THRESHOLD: '16' }, flags: { maxTreeSize: '1024' } });
      expect(c).toMatchObject({ policy: 'cache_aware', cacheThreshold: 0.5, balanceAbsThreshold: 16, balanceRelThreshold: 1.25, maxTreeSize: 1024, continuationPlacement: false, loadIntervalMs: 250 });
      expect(loadConfig({ env: { BATON_CONTINUATION_PLACEMENT: 'true' } }).continuationPlacement).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each([
    [{ cacheThreshold: '1.5' }, /command line: cache-threshold must be a number from 0 to 1, got "1.5"/],
    [{ cacheThreshold: 'x' }, /cache-threshold must be a number from 0 to 1/],
    [{ balanceRelThreshold: '-1' }, /balance-rel-threshold must be a non-negative number/],
    [{ balanceAbsThreshold: '2.5' }, /balance-abs-threshold must be a non-negative integer/],
    [{ continuationPlacement: 'maybe' }, /continuation-placement must be true or false/],
    [{ policy: 'cache' }, /policy must be one of least_inflight, round_robin, power_of_two, cache_aware/],
  ])('refuses %j', (flags, message) => {
    expect(() => loadConfig({ flags })).toThrow(ConfigError);
    expect(() => loadConfig({ flags })).toThrow(message);
  });
});
