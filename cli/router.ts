import { UsageError } from './args.ts';

export async function run(_argv: string[]): Promise<void> {
  throw new UsageError('not built yet');
}
