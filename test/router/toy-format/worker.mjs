// A toy worker of the toy wire format (format.ts): one process on loopback, started with
// `node worker.mjs [tokenIntervalMs]`. It prints `listening <port>` once it listens and
// `generate <rid>` when a generate call arrives (the test kills the process that serves a request).
// Each token is a function of the whole sequence before it (nextToken), so a continuation that
// is sent the prompt and the tokens so far goes on exactly as the first worker would have.
import { createServer } from 'node:http';

const interval = Number(process.argv[2] ?? 5);
const live = new Map();

function nextToken(seq) {
  return (seq.length * 7 + seq[seq.length - 1] * 13) % 1000;
}

function json(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function readJson(req) {
  return new Promise((resolve, reject) => {
    const parts = [];
    req.on('data', (d) => parts.push(d));
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(parts).toString('utf8')));
      } catch (err) {
        reject(err);
      }
    });
    req.on('error', reject);
  });
}

const server = createServer(async (req, res) => {
  const path = (req.url ?? '').split('?')[0];
  if (req.method === 'GET' && path === '/health') return json(res, 200, {});
  if (req.method === 'GET' && path === '/toy_info') return json(res, 200, { toy: true, model: 'toy-model' });
  if (req.method === 'POST' && path === '/toy/abort') {
    const { rid } = await readJson(req);
    live.get(rid)?.();
    return json(res, 200, {});
  }
  if (req.method !== 'POST' || path !== '/toy/generate') return json(res, 404, { detail: 'Not Found' });
  let body;
  try {
    body = await readJson(req);
  } catch {
    return json(res, 400, { error: 'bad JSON' });
  }
  const seq = [...body.prompt];
  const total = body.max_tokens;
  process.stdout.write(`generate ${body.rid}\n`);
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  let made = 0;
  const timer = setInterval(() => {
    const token = nextToken(seq);
    seq.push(token);
    made++;
    const last = made >= total;
    res.write(`data: ${JSON.stringify(last ? { token, finish: 'length' } : { token })}\n\n`);
    if (last) stop();
  }, interval);
  const stop = () => {
    clearInterval(timer);
    live.delete(body.rid);
    if (!res.writableEnded) res.end('data: [DONE]\n\n');
  };
  live.set(body.rid, stop);
  res.on('close', () => clearInterval(timer));
});

server.listen(0, '127.0.0.1', () => process.stdout.write(`listening ${server.address().port}\n`));
