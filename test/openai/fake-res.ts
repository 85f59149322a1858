// A ServerResponse stand-in that keeps what was written: the client side of the OpenAI session
// tests, which drive a session without a server.
import { EventEmitter } from 'node:events';

export class FakeRes extends EventEmitter {
  body = '';
  status = 0;
  writeHead(status: number): this {
    this.status = status;
    return this;
  }
  write(d: Buffer | string): boolean {
    this.body += d.toString();
    return true;
  }
  end(d?: Buffer | string): this {
    if (d) this.body += d.toString();
    return this;
  }
  cork(): void {}
  uncork(): void {}
}
