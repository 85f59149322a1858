// Small helpers on parsed JSON shared by the formats.
import type { JsonObject } from './types.ts';

export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Append `src` to `dst` without spreading it into arguments (a 130k-entry spread throws). */
export function appendAll<T>(dst: T[], src: readonly T[]): void {
  for (let i = 0; i < src.length; i++) dst.push(src[i]!);
}
