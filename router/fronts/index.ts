// The fronts Baton serves, and the one place that names them (beside formats/registry.ts, which
// names the wire formats the loop speaks to workers). A front is a folder with its parse, its
// error shapes and its routes, registered here with one line; the request path they share is
// http/request-path.ts. Adding one (Anthropic Messages, the Responses API) is a folder and a line.
import type { ServerResponse } from 'node:http';
import type { RouterConfig } from '../config.ts';
import type { Routes } from '../http/routes.ts';
import type { Keys } from '../http/guards.ts';
import type { RequestPath } from '../http/request-path.ts';
import type { ReplicaWrites } from '../http/worker-writes.ts';
import type { WorkerPool } from '../pool/worker-pool.ts';
import type { ServedModels } from './openai/models.ts';
import { addSglangFront } from './sglang/generate.ts';
import { addVllmFront } from './vllm/front.ts';
import { addOpenAiFront } from './openai/api.ts';
import { addResponsesFront } from './openai/responses-api.ts';
import { addPlainFronts } from './plain.ts';
import { OPENAI_FORMAT } from './openai/index.ts';
import { FORMATS } from '../formats/registry.ts';
import { methodNotAllowed, notFound } from '../formats/sglang/errors.ts';

/** What a front registers its routes with: built once by startRouter. */
export interface FrontContext {
  routes: Routes;
  path: RequestPath;
  pool: WorkerPool;
  models: ServedModels;
  config: RouterConfig;
  keys: Keys;
  /** Under `--replicas`: writes on the shared port reach every replica (http/worker-writes.ts); null for a lone router. */
  replicas: ReplicaWrites | null;
  /** This router process among the replicas of one router (index.ts fills it from router/replicas/). */
  replica: FrontReplica;
}

/** A replica as a front sees it: its id, and (under `--replicas`) the list of every replica with its own address. */
export interface FrontReplica {
  id: string;
  peers?: () => Promise<{ id: string; url: string; state: string }[]>;
}

/** The models the router serves with its own tokenizers (--tokenizer): the SGLang and OpenAI fronts read them. */
export { ServedModels } from './openai/models.ts';

/** In registration order (a path's methods are listed in a 405 in the order they were added). */
export const FRONTS: readonly ((c: FrontContext) => void)[] = [
  addSglangFront, // SGLang's native API: /generate, /abort_request, /flush_cache, /server_info, ...
  addVllmFront, // vLLM's /inference/v1/generate and its aborts
  addOpenAiFront, // /v1/completions, /v1/chat/completions, /v1/models
  addResponsesFront, // /v1/responses and its stored responses, with tokenizers
  addPlainFronts, // a wire format without a front of its own: its generate path, its parse and refusals
];

/** The formats clients speak, as trace rows and metrics name them: each wire format's, then the OpenAI fronts'. */
export function clientFormats(): string[] {
  return [...FORMATS.map((f) => f.name), OPENAI_FORMAT];
}

/** Paths and methods no route serves: Starlette's answers, as SGLang gives them. */
export const UNROUTED: { notFound(res: ServerResponse): void; methodNotAllowed(res: ServerResponse, allowed: string[]): void } = { notFound, methodNotAllowed };
