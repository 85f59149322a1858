import type { Policy } from './policy.ts';
import { RoundRobin } from './round-robin.ts';
import { PowerOfTwo } from './power-of-two.ts';
import { LeastInflight } from './least-inflight.ts';

export const POLICY_NAMES = ['least_inflight', 'round_robin', 'power_of_two'] as const;
export type PolicyName = (typeof POLICY_NAMES)[number];

export function createPolicy(name: string): Policy {
  switch (name) {
    case 'round_robin': return new RoundRobin();
    case 'power_of_two': return new PowerOfTwo();
    case 'least_inflight': return new LeastInflight();
    default: throw new Error(`unknown policy '${name}' (expected one of ${POLICY_NAMES.join(', ')})`);
  }
}
