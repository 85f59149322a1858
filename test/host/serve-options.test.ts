// `baton serve`'s options for replicas: --replicas N, or replicas: in the --config file (the flag
// wins), refused when out of bounds or beside --router (a hub runs no router of its own).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../lib/args.ts';
import { appOptionsFromArgv, run, workersWords } from '../../cli/serve.ts';
import { resolveAppOptions, routerConfig, SIM_REASONING_PARSER, SIM_TOOL_CALL_PARSER } from '../../host/app.ts';
import { loadConfig } from '../../router/config.ts';

describe('baton serve --replicas', () => {
  it('takes the count from the flag, else the config file, else 1', () => {
    expect(appOptionsFromArgv([]).replicas).toBe(1);
    expect(appOptionsFromArgv(['--replicas', '3', '--sim', '2'])).toMatchObject({ replicas: 3, sim: 2 });
    const file = join(mkdtempSync(join(tmpdir(), 'baton-serve-')), 'baton.yaml');
    writeFileSync(file, 'replicas: 2\nmigration_limit: 5\n');
    const fromFile = appOptionsFromArgv(['--config', file]);
    expect(fromFile.replicas).toBe(2);
    // The count is the host's to act on, not a setting handed to each replica's router.
    expect(fromFile.router).not.toHaveProperty('replicas');
    expect(fromFile.router).toMatchObject({ migrationLimit: 5 });
    expect(appOptionsFromArgv(['--config', file, '--replicas', '1']).replicas).toBe(1);
    // auto: one per core the process may use, as baton router reads it.
    expect(appOptionsFromArgv(['--replicas', 'auto']).replicas).toBe(loadConfig({ flags: { replicas: 'auto' }, env: process.env }).replicas);
  });

  it('refuses a count out of bounds, and --replicas beside --router', async () => {
    for (const bad of ['0', '65', 'two', '1.5']) {
      expect(() => appOptionsFromArgv(['--replicas', bad])).toThrow(UsageError);
      expect(() => appOptionsFromArgv(['--replicas', bad])).toThrow(`--replicas must be an integer from 1 to 64, got '${bad}'`);
    }
    await expect(run(['--router', 'http://127.0.0.1:9', '--replicas', '2'])).rejects.toThrow(UsageError);
    await expect(run(['--router', 'http://127.0.0.1:9', '--replicas', '2'])).rejects.toThrow('--replicas does not go with --router: the hub follows routers, it runs none');
  });
});

describe("baton serve's startup line", () => {
  it('counts a simulated P/D cluster by role, and any other cluster as workers', () => {
    const words = (argv: string[]) => {
      const opts = appOptionsFromArgv(argv);
      return workersWords(opts, resolveAppOptions(opts).sim);
    };
    expect(words(['--sim-pd'])).toBe('2 prefill + 2 decode workers (4 simulated)');
    expect(words(['--sim-pd', '--sim', '3'])).toBe('2 prefill + 1 decode workers (3 simulated)');
    expect(words(['--sim-pd', '--sim', '2', '--worker', 'http://127.0.0.1:9'])).toBe('1 prefill + 1 decode workers (2 simulated, 1 more given)');
    expect(words(['--sim', '3'])).toBe('3 workers (3 simulated)');
    expect(words(['--worker', 'http://127.0.0.1:9'])).toBe('1 worker (0 simulated)');
  });
});

describe("baton serve's chat parsers", () => {
  it('passes --tool-call-parser and --reasoning-parser to its router, as baton router takes them', () => {
    const opts = appOptionsFromArgv(['--tool-call-parser', 'llama3', '--reasoning-parser', 'deepseek-r1']);
    expect(routerConfig(opts)).toMatchObject({ toolCallParser: 'llama3', reasoningParser: 'deepseek-r1' });
    expect(() => appOptionsFromArgv(['--tool-call-parser', 'nope'])).toThrow(UsageError);
    expect(() => appOptionsFromArgv(['--reasoning-parser', 'nope'])).toThrow(UsageError);
    // None by default: the router serves chat answers unparsed, as SGLang does.
    expect(routerConfig(appOptionsFromArgv([]))).not.toHaveProperty('toolCallParser');
  });

  it("turns on the simulated model's parsers with --sim-format openai, unless told others", () => {
    expect(routerConfig(appOptionsFromArgv(['--sim-format', 'openai']))).toMatchObject({ toolCallParser: SIM_TOOL_CALL_PARSER, reasoningParser: SIM_REASONING_PARSER });
    expect(routerConfig(appOptionsFromArgv(['--sim-format', 'openai', '--reasoning-parser', 'qwen3-thinking']))).toMatchObject({ toolCallParser: 'qwen25', reasoningParser: 'qwen3-thinking' });
  });
});
