// The Kubernetes source the config asks for (--service-discovery, docs/kubernetes.md).
import type { RouterConfig } from '../config.ts';
import type { DiscoverySource } from './types.ts';
import { clientFromKubeConfig, type K8sClient } from './k8s-api.ts';
import { K8sPodsSource } from './k8s-pods.ts';
import { K8sEndpointSlicesSource } from './k8s-endpointslices.ts';

type K8sConfig = Pick<RouterConfig, 'selector' | 'serviceDiscoveryPort' | 'serviceDiscoveryNamespace' | 'serviceDiscoveryMode' | 'serviceDiscoveryService' | 'serviceDiscoveryRelistMs' | 'serviceDiscoveryWatchdogMs'>;

/** A source from the config; `client` defaults to one from the kubeconfig (KUBECONFIG, ~/.kube/config or in-cluster). */
export async function k8sSource(cfg: K8sConfig, opts: { client?: K8sClient; log?: (line: string) => void } = {}): Promise<DiscoverySource> {
  const client = opts.client ?? (await clientFromKubeConfig());
  const common = {
    client,
    namespace: cfg.serviceDiscoveryNamespace,
    selector: cfg.selector,
    port: cfg.serviceDiscoveryPort,
    relistMs: cfg.serviceDiscoveryRelistMs,
    watchdogMs: cfg.serviceDiscoveryWatchdogMs,
    log: opts.log,
  };
  if (cfg.serviceDiscoveryMode === 'endpointslices') return new K8sEndpointSlicesSource({ ...common, service: cfg.serviceDiscoveryService ?? '' });
  return new K8sPodsSource(common);
}
