// Copy as curl: each body goes to the router front it belongs to, and the replay runs
// under an id of its own that names the original (`<id>-replay-1`), in the header and, for an
// SGLang body that has one, in its `rid` (the router takes a body's rid before the header).
import { describe, expect, it } from 'vitest';
import { curlGenerate, frontOf } from '../../renderer/src/views/curl.ts';
import { generateRequest, toOpenAiChat, toVllm } from '../../host/traffic-request.ts';
import { DEFAULT_TRAFFIC } from '../../host/traffic-settings.ts';
import { replayAddress, splitHubId } from '../../renderer/src/store/hub-labels.ts';
import { hubOf, link } from './hub-fixtures.ts';

const URL_ = 'http://127.0.0.1:30080';

/** The argv of a curl command line as a POSIX shell would split it (single quotes only, as curl.ts writes). */
function argv(cmd: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quoted = false;
  let any = false;
  for (let i = 0; i < cmd.length; i++) {
    const c = cmd[i]!;
    if (quoted) {
      if (c === "'") quoted = false;
      else cur += c;
    } else if (c === "'") {
      quoted = true;
      any = true;
    } else if (c === '\\') {
      cur += cmd[++i];
      any = true;
    } else if (c === ' ') {
      if (any || cur) out.push(cur);
      cur = '';
      any = false;
    } else cur += c;
  }
  if (any || cur) out.push(cur);
  return out;
}

function parts(cmd: string) {
  const a = argv(cmd);
  const headers = a.flatMap((x, i) => (a[i - 1] === '-H' ? [x] : []));
  return { url: a.find((x) => x.startsWith('http'))!, headers, body: JSON.parse(a[a.indexOf('-d') + 1]!) as Record<string, unknown>, flags: a[1]! };
}

const sglang = generateRequest({ ...DEFAULT_TRAFFIC, streamShare: 1 }, () => 0.3).body;

describe('copy as curl', () => {
  it('/generate: an SGLang body, its rid renamed with the header', () => {
    const c = parts(curlGenerate(URL_, { ...sglang, rid: 'abc' }, { requestId: 'abc' }));
    expect(c.url).toBe(`${URL_}/generate`);
    expect(c.headers).toContain('x-request-id: abc-replay-1');
    expect(c.body.rid).toBe('abc-replay-1');
    expect(c.body.input_ids).toEqual(sglang.input_ids);
    expect(c.flags).toBe('-sN');
  });

  it('/generate without a rid: the header alone carries the replay id, and the body is sent as it was', () => {
    const c = parts(curlGenerate(URL_, sglang, { requestId: 'f00d' }));
    expect(c.headers).toContain('x-request-id: f00d-replay-1');
    expect(c.body).toEqual(sglang);
  });

  it('/inference/v1/generate: a vLLM token-in body (the header overrides its request_id, as vLLM does)', () => {
    const body = toVllm(sglang);
    const c = parts(curlGenerate(URL_, body, { requestId: 'r1' }));
    expect(c.url).toBe(`${URL_}/inference/v1/generate`);
    expect(c.headers).toContain('x-request-id: r1-replay-1');
    expect(c.body).toEqual(body);
  });

  it('/v1/chat/completions: an OpenAI chat body, never /generate', () => {
    const body = toOpenAiChat(sglang);
    const c = parts(curlGenerate(URL_, body, { requestId: 'chat-1' }));
    expect(c.url).toBe(`${URL_}/v1/chat/completions`);
    expect(c.headers).toContain('x-request-id: chat-1-replay-1');
    expect(c.body).toEqual(body);
  });

  it('/v1/completions: an OpenAI completions body (a prompt, no SGLang keys)', () => {
    const body = { model: 'm', prompt: 'Once upon', max_tokens: 8, stream: false };
    const c = parts(curlGenerate(URL_, body, { requestId: 'cmp' }));
    expect(c.url).toBe(`${URL_}/v1/completions`);
    expect(c.flags).toBe('-s');
    expect(c.body).toEqual(body);
  });

  it('the path the host recorded wins over the body\'s shape, and quotes in a body survive the shell', () => {
    const body = { prompt: "it's", max_tokens: 1 };
    const c = parts(curlGenerate(URL_, body, { path: '/v1/chat/completions' }));
    expect(c.url).toBe(`${URL_}/v1/chat/completions`);
    expect(c.body).toEqual(body);
    expect(frontOf({ text: 'hi', sampling_params: {} })).toBe('/generate');
    expect(frontOf(null)).toBe('/generate');
  });

  it("behind the hub: the replay runs as the client's id, not the hub's `r1/...`, at an address that serves requests", () => {
    const hub = hubOf([link('r0', URL_), link('r1', 'http://127.0.0.1:30081')], null);
    const pageId = 'r1/9b46';
    const c = parts(curlGenerate(replayAddress(pageId, hub, 'http://127.0.0.1:5999'), { ...sglang, rid: '9b46' }, { requestId: splitHubId(pageId, hub).clientId }));
    expect(c.url).toBe('http://127.0.0.1:30081/generate');
    expect(c.headers).toContain('x-request-id: 9b46-replay-1');
    expect(c.body.rid).toBe('9b46-replay-1');
  });
});
