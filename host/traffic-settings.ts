// The traffic generator's settings: defaults, and the check a live update goes through before it
// reaches the generator (a PUT from the page or an IPC call are both untrusted input).
import type { TrafficSettings } from './contract.ts';

export const DEFAULT_TRAFFIC: TrafficSettings = {
  rate: 6,
  concurrency: 48,
  promptMin: 16,
  promptMax: 96,
  budgetMin: 96,
  budgetMax: 320,
  streamShare: 0.7,
  nonMigratableShare: 0.1,
  running: true,
};

const LIMITS: Record<Exclude<keyof TrafficSettings, 'running'>, [number, number, boolean]> = {
  // [min, max, integer]
  rate: [0, 1000, false],
  concurrency: [1, 4096, true],
  promptMin: [1, 32768, true],
  promptMax: [1, 32768, true],
  budgetMin: [1, 32768, true],
  budgetMax: [1, 32768, true],
  streamShare: [0, 1, false],
  nonMigratableShare: [0, 1, false],
};

export class TrafficSettingsError extends Error {}

/** Validates a partial update; unknown keys and out-of-range values are errors, not silently dropped. */
export function parseTrafficPatch(input: unknown): Partial<TrafficSettings> {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw new TrafficSettingsError('traffic settings must be a JSON object');
  }
  const patch: Partial<TrafficSettings> = {};
  for (const [key, value] of Object.entries(input)) {
    if (key === 'running') {
      if (typeof value !== 'boolean') throw new TrafficSettingsError('running must be a boolean');
      patch.running = value;
      continue;
    }
    const limit = LIMITS[key as keyof typeof LIMITS];
    if (!limit) throw new TrafficSettingsError(`unknown traffic setting '${key}'`);
    const [min, max, integer] = limit;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max || (integer && !Number.isInteger(value))) {
      throw new TrafficSettingsError(`${key} must be ${integer ? 'an integer' : 'a number'} in [${min}, ${max}]`);
    }
    patch[key as keyof typeof LIMITS] = value;
  }
  return patch;
}

/** Applies a patch, keeping each min <= max by moving the other end of the range. */
export function mergeTraffic(current: TrafficSettings, patch: Partial<TrafficSettings>): TrafficSettings {
  const next = { ...current, ...patch };
  if (next.promptMin > next.promptMax) {
    if (patch.promptMin !== undefined) next.promptMax = next.promptMin;
    else next.promptMin = next.promptMax;
  }
  if (next.budgetMin > next.budgetMax) {
    if (patch.budgetMin !== undefined) next.budgetMax = next.budgetMin;
    else next.budgetMin = next.budgetMax;
  }
  return next;
}
