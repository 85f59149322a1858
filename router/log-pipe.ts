// A server's logs go to whatever reads its stdout and stderr: a terminal, `| tee`, a log shipper.
// When that reader goes away (`| head`, a shipper restarted) the next console.log fails with EPIPE,
// which Node raises as an unhandled 'error' event: the router would die of losing its log reader,
// mid-traffic, and a `--replicas` primary of it while stopping (its replicas restarted into the
// same crash). A server keeps serving without its logs instead; other stream errors still throw.

function ignoreEpipe(err: NodeJS.ErrnoException): void {
  if (err.code === 'EPIPE') return;
  throw err;
}

let installed = false;

/** Installs the handlers on process.stdout and process.stderr, once. */
export function surviveClosedLogPipe(): void {
  if (installed) return;
  installed = true;
  process.stdout.on('error', ignoreEpipe);
  process.stderr.on('error', ignoreEpipe);
}
