/**
 * A refusal the caller caused (bad input, unknown worker), with the HTTP status it maps to in
 * browser mode; over IPC only the message travels.
 */
export class HostError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}
