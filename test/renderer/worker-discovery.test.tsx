// The Workers view's discovery indicators (renderer/src/views/WorkerCard.tsx): where a discovered
// worker came from (source, pod, namespace, node) and a draining worker's time left; a worker
// added by hand shows neither.
import { describe, expect, it } from 'vitest';
import { renderToStaticMarkup } from 'react-dom/server';
import { WorkerCard } from '../../renderer/src/views/WorkerCard.tsx';
import type { WorkerInfo } from '../../router/events/types.ts';

const base: WorkerInfo = {
  id: 'w3', url: 'http://10.1.2.3:30000', health: 'healthy', circuit: 'closed', format: 'sglang', token_only: true, incremental: false,
  model_path: 'm', weight_version: 'v1', in_flight: 2, simulated: false, sim_index: null, draining: false,
};
const noop = () => undefined;
const card = (w: WorkerInfo, now = 1_000_000) => renderToStaticMarkup(
  <WorkerCard worker={w} now={now} sim={null} tokensPerSec={0} sparkline={[]} probe={null} readAt={null} enabled onSim={noop} onDrain={noop} onRemove={noop} />,
);

describe('worker card: discovery', () => {
  it('names the source, pod, namespace and node of a discovered worker', () => {
    const html = card({ ...base, discovery: { source: 'k8s-pods', key: 'uid-1', pod: 'sglang-0', namespace: 'inference', node: 'gpu-7' } });
    expect(html).toContain('data-testid="worker-discovery"');
    expect(html).toContain('k8s-pods: sglang-0 · inference · on gpu-7');
  });

  it('shows a draining worker\'s time to its deadline', () => {
    const html = card({ ...base, health: 'draining', draining: true, drain_deadline: 1_000_000 + 5_400, discovery: { source: 'file', key: 'http://10.1.2.3:30000' } });
    expect(html).toContain('draining · removed in 6 s');
  });

  it('shows neither for a hand-added worker drained without a deadline', () => {
    const html = card({ ...base, health: 'draining', draining: true });
    expect(html).not.toContain('worker-discovery');
    expect(html).toContain('>draining</span>');
  });
});
