// The discovery settings: the SGLang gateway's flag names, and clear errors for what cannot work.
import { describe, expect, it } from 'vitest';
import { configFromArgv } from '../../cli/router.ts';
import { ConfigError, loadConfig } from '../../router/config.ts';

describe('service discovery settings', () => {
  it('reads the gateway\'s flags', () => {
    const c = configFromArgv(['--service-discovery', '--selector', 'app=sglang', '--selector', 'tier=gpu,zone=a', '--service-discovery-port', '30000', '--service-discovery-namespace', 'llm', '--service-discovery-relist-ms', '5000'], {})!;
    expect(c).toMatchObject({ serviceDiscovery: true, selector: ['app=sglang', 'tier=gpu', 'zone=a'], serviceDiscoveryPort: 30000, serviceDiscoveryNamespace: 'llm', serviceDiscoveryMode: 'pods', serviceDiscoveryRelistMs: 5000, serviceDiscoveryWatchdogMs: 10000 });
    const e = configFromArgv(['--service-discovery', '--service-discovery-mode', 'endpointslices', '--service-discovery-service', 'workers'], {})!;
    expect(e).toMatchObject({ serviceDiscoveryMode: 'endpointslices', serviceDiscoveryService: 'workers' });
  });

  it('reads them from the environment and a file too', () => {
    expect(loadConfig({ env: { BATON_SERVICE_DISCOVERY: 'true', BATON_SELECTOR: 'app=a,b=c' } })).toMatchObject({ serviceDiscovery: true, selector: ['app=a', 'b=c'] });
  });

  it.each([
    [['--service-discovery'], /pods mode needs --selector/],
    [['--service-discovery', '--service-discovery-mode', 'endpointslices'], /needs --service-discovery-service/],
    [['--service-discovery-mode', 'nodes'], /service-discovery-mode must be pods or endpointslices/],
    [['--selector', 'app'], /selector must be label terms key=value/],
    [['--service-discovery-namespace', 'Bad_NS'], /must be a Kubernetes name/],
    [['--service-discovery', '--selector', 'a=b', '--service-discovery-relist-ms', '10'], /at least 1000/],
  ])('refuses %j', (argv, msg) => {
    expect(() => configFromArgv(argv, {})).toThrow(msg);
  });

  it('a bad boolean names its source', () => {
    expect(() => loadConfig({ env: { BATON_SERVICE_DISCOVERY: 'yes' } })).toThrow(ConfigError);
    expect(() => loadConfig({ env: { BATON_SERVICE_DISCOVERY: 'yes' } })).toThrow(/environment BATON_SERVICE_DISCOVERY: service-discovery must be true or false/);
  });
});
