import { UsageError } from '../lib/args.ts';
import { surviveClosedLogPipe } from '../router/log-pipe.ts';

// `baton <command>`: each command lives in its own module and is loaded only when asked for,
// so `baton sim` does not pay for the dashboard and `baton router` does not load the simulator.
const commands: Record<string, { summary: string; load: () => Promise<{ run(argv: string[]): Promise<void> }> }> = {
  router: { summary: 'headless migrating router', load: () => import('./router.ts') },
  sim: { summary: 'simulated SGLang cluster', load: () => import('./sim.ts') },
  serve: { summary: 'router + dashboard in browser mode', load: () => import('./serve.ts') },
  traces: { summary: 'export trace rows from a running router', load: () => import('./traces.ts') },
  view: { summary: 'open a trace file (JSONL or CSV) in the dashboard, offline', load: () => import('./view.ts') },
  chaos: { summary: 'chaos campaign against a simulated cluster', load: () => import('./chaos.ts') },
  bench: { summary: 'benchmarks against direct, bare proxy and nginx', load: () => import('./bench.ts') },
};

function usage(): string {
  const lines = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(8)} ${c.summary}`);
  return `usage: baton <command> [options]\n\ncommands:\n${lines.join('\n')}\n\nRun 'baton <command> --help' for a command's options.`;
}

export async function main(argv: string[]): Promise<void> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    console.log(usage());
    return;
  }
  const command = commands[name];
  if (!command) {
    console.error(`baton: unknown command '${name}'\n\n${usage()}`);
    process.exitCode = 2;
    return;
  }
  // The servers outlive their log reader; a command that prints a result (traces, view) does not
  // need to: a closed pipe ends it as it ends any Unix filter.
  if (name === 'router' || name === 'sim' || name === 'serve') surviveClosedLogPipe();
  const mod = await command.load();
  try {
    await mod.run(rest);
  } catch (err) {
    // Option errors are the user's to fix: one clear line, no stack.
    if (err instanceof UsageError) {
      console.error(`baton ${name}: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }
}
