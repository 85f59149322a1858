// The Kubernetes source the config asks for (--service-discovery, docs/kubernetes.md): pods by
// label selector, or the EndpointSlices of a Service. The kubeconfig is read when the source
// starts, so a router without one fails its start with one clear error.
import type { RouterConfig } from '../config.ts';
import type { DiscoverySink, DiscoverySource } from './types.ts';
import { clientFromKubeConfig, type K8sClient } from './k8s-api.ts';
import { K8sPodsSource } from './k8s-pods.ts';
import { K8sEndpointSlicesSource } from './k8s-endpointslices.ts';

type K8sConfig = Pick<RouterConfig, 'serviceDiscovery' | 'selector' | 'serviceDiscoveryPort' | 'serviceDiscoveryNamespace' | 'serviceDiscoveryMode' | 'serviceDiscoveryService' | 'serviceDiscoveryRelistMs' | 'serviceDiscoveryWatchdogMs' | 'drainGraceMs'>;

export interface K8sSourceDeps {
  /** Default: a client from KUBECONFIG, ~/.kube/config or the pod's service account. */
  client?: K8sClient;
  log?: (line: string) => void;
}

/** The source for `--service-discovery`, or null when it is off. */
export function k8sSource(cfg: K8sConfig, deps: K8sSourceDeps = {}): DiscoverySource | null {
  if (!cfg.serviceDiscovery) return null;
  return new K8sSource(cfg, deps);
}

class K8sSource implements DiscoverySource {
  readonly name: string;
  private inner: K8sPodsSource | K8sEndpointSlicesSource | null = null;

  constructor(private readonly cfg: K8sConfig, private readonly deps: K8sSourceDeps) {
    this.name = cfg.serviceDiscoveryMode === 'endpointslices' ? 'k8s-endpointslices' : 'k8s-pods';
  }

  async start(sink: DiscoverySink): Promise<void> {
    const cfg = this.cfg;
    let client = this.deps.client;
    if (!client) {
      try {
        client = await clientFromKubeConfig();
      } catch (err) {
        throw new Error(`service discovery: cannot read a kubeconfig (KUBECONFIG, ~/.kube/config, or in-cluster): ${(err as Error).message}`);
      }
    }
    const common = {
      client,
      namespace: cfg.serviceDiscoveryNamespace,
      selector: cfg.selector,
      port: cfg.serviceDiscoveryPort,
      relistMs: cfg.serviceDiscoveryRelistMs,
      watchdogMs: cfg.serviceDiscoveryWatchdogMs,
      log: this.deps.log ?? ((line: string) => console.error(`discovery ${this.name}: ${line}`)),
    };
    // A slice carries no deadline: a terminating endpoint gets the grace of POST /workers/:id/drain.
    this.inner = cfg.serviceDiscoveryMode === 'endpointslices'
      ? new K8sEndpointSlicesSource({ ...common, service: cfg.serviceDiscoveryService ?? '', drainGraceMs: cfg.drainGraceMs })
      : new K8sPodsSource(common);
    await this.inner.start(sink);
  }

  async stop(): Promise<void> {
    await this.inner?.stop();
  }
}
