// The wire formats a campaign speaks (kept apart from traffic.ts so that `baton chaos --help` and
// option errors need not load the simulator).

/** The wire format of one request, and of the workers that may serve it. */
export type WireFormat = 'sglang' | 'vllm';
/** The formats of a campaign: its workers and its traffic. */
export type CampaignFormat = WireFormat | 'mixed';
export const CAMPAIGN_FORMATS: readonly CampaignFormat[] = ['sglang', 'vllm', 'mixed'];

/** The router's endpoint for each format. */
export const GENERATE_PATH: Record<WireFormat, string> = { sglang: '/generate', vllm: '/inference/v1/generate' };
