// A raw HTTP/1.1 test server's side of a connection: the requests on it, split by their heads'
// content-length, each handed on whole (for servers that answer byte by byte as a test needs).
import type { Socket } from 'node:net';

export function onRequests(s: Socket, handle: (head: string, body: Buffer) => void): void {
  let buf = Buffer.alloc(0);
  s.on('data', (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    for (;;) {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.toString('latin1', 0, end);
      const len = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
      if (buf.length < end + 4 + len) return;
      const body = buf.subarray(end + 4, end + 4 + len);
      buf = buf.subarray(end + 4 + len);
      handle(head, body);
    }
  });
}
