// The command-line parsing every `baton` command shares (cli/): node:util's parser in strict mode
// and the integer flags, each mistake a UsageError. It lives in lib/, not in cli/, because a
// simulated worker process (sim/worker-main.ts) parses its own flags with it, and sim/ imports
// nothing of cli/ (cli/ starts the simulator, not the other way round).

import { parseArgs, type ParseArgsConfig } from 'node:util';

/** A mistake in the command line: printed as one line, exit code 2. */
export class UsageError extends Error {}

type Options = NonNullable<ParseArgsConfig['options']>;

/** node:util parseArgs in strict mode, with its errors turned into UsageErrors. */
export function parseFlags<O extends Options>(argv: string[], options: O) {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals: false }).values;
  } catch (err) {
    // node:util explains some mistakes over several lines; the first says what is wrong.
    throw new UsageError((err as Error).message.split('\n')[0]!.trim());
  }
}

/** A non-negative integer flag, or a UsageError naming the flag. */
export function intFlag(name: string, value: string | undefined, fallback: number, min = 0): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new UsageError(`--${name} must be an integer >= ${min}, got '${value}'`);
  return n;
}
