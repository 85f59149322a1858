// The Kubernetes source the config asks for (--service-discovery, docs/kubernetes.md): pods by
// label selector, or the EndpointSlices of a Service. The kubeconfig is read when the source
// starts, so a router without one fails its start with one clear error.
import type { RouterConfig } from '../config.ts';
import type { DiscoverySink, DiscoverySource } from './types.ts';
import { clientFromKubeConfig, type K8sClient } from './k8s-api.ts';
import { K8sPodsSource } from './k8s-pods.ts';
import { K8sEndpointSlicesSource } from './k8s-endpointslices.ts';

type K8sConfig = Pick<RouterConfig, 'serviceDiscovery' | 'selector' | 'pdDisaggregation' | 'prefillSelector' | 'decodeSelector' | 'serviceDiscoveryPort' | 'serviceDiscoveryNamespace' | 'serviceDiscoveryMode' | 'serviceDiscoveryService' | 'serviceDiscoveryRelistMs' | 'serviceDiscoveryWatchdogMs' | 'drainGraceMs'>;

export interface K8sSourceDeps {
  /** Default: a client from KUBECONFIG, ~/.kube/config or the pod's service account. */
  client?: K8sClient;
  log?: (line: string) => void;
}

/**
 * The source for `--service-discovery`, or null when it is off. Beside P/D role sources it finds
 * the regular workers only: a pod that matches --prefill-selector or --decode-selector is theirs
 * (below), as the gateway gives each pod one type (service_discovery.rs `PodInfo::from_pod`).
 */
export function k8sSource(cfg: K8sConfig, deps: K8sSourceDeps = {}): DiscoverySource | null {
  if (!cfg.serviceDiscovery) return null;
  // With P/D role selectors, the general selector only adds aggregated workers beside the pairs.
  if (cfg.serviceDiscoveryMode === 'pods' && cfg.selector.length === 0) return null;
  return new K8sSource(cfg, deps);
}

/**
 * P/D (docs/pd.md): the pods of --prefill-selector or --decode-selector, as the gateway finds them
 * (service_discovery.rs `PodInfo::should_include` / `from_pod`: a pod matching the prefill
 * selector is a prefill server, with the `sglang.ai/bootstrap-port` annotation; else one matching
 * the decode selector is a decode server; else, matching --selector, a regular worker). Null when
 * P/D discovery of that role is off.
 */
export function k8sRoleSource(cfg: K8sConfig, role: 'prefill' | 'decode', deps: K8sSourceDeps = {}): DiscoverySource | null {
  const selector = role === 'prefill' ? cfg.prefillSelector : cfg.decodeSelector;
  if (!roleSources(cfg) || selector.length === 0) return null;
  return new K8sSource(cfg, deps, role);
}

/** Whether P/D role sources run (an empty role selector has none: labelsMatch never matches it). */
function roleSources(cfg: K8sConfig): boolean {
  return cfg.serviceDiscovery && cfg.pdDisaggregation && cfg.serviceDiscoveryMode === 'pods';
}

class K8sSource implements DiscoverySource {
  readonly name: string;
  private inner: K8sPodsSource | K8sEndpointSlicesSource | null = null;

  constructor(private readonly cfg: K8sConfig, private readonly deps: K8sSourceDeps, private readonly role?: 'prefill' | 'decode') {
    this.name = cfg.serviceDiscoveryMode === 'endpointslices' ? 'k8s-endpointslices' : role ? `k8s-pods-${role}` : 'k8s-pods';
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
      : this.role === undefined
        ? new K8sPodsSource({ ...common, ...(roleSources(cfg) ? { unless: [cfg.prefillSelector, cfg.decodeSelector] } : {}) })
        : new K8sPodsSource({
          ...common,
          selector: this.role === 'prefill' ? cfg.prefillSelector : cfg.decodeSelector,
          role: this.role,
          ...(this.role === 'decode' ? { unless: [cfg.prefillSelector] } : {}),
        });
    await this.inner.start(sink);
  }

  async stop(): Promise<void> {
    await this.inner?.stop();
  }
}
