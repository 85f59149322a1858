// Incremental detokenization: the text of a growing id sequence, handed out as it becomes stable.
// The law (test/tokenizer/incremental.test.ts): whatever the ids' split into pushes — a migration
// boundary is one more split — the concatenation of every push and the flush equals
// decode(all ids), and the text after each push is decode(ids so far) less a held-back tail.
//
// Two ways to get there:
// - ByteLevel tokenizers (GPT-2 style: Llama 3, Qwen, DeepSeek, ...): decode is the lossy UTF-8
//   of the kept tokens' bytes, so a streaming UTF-8 decoder yields it exactly, holding back only an
//   incomplete character at the end (WHATWG's decoder: streamed output equals one-shot output).
// - Other decoders: the prefix_offset / read_offset windows of TGI and vLLM
//   (vllm/.../tokenizers/detokenizer_utils.py detokenize_incrementally; SGLang's detokenizer
//   manager keeps the same pair as surr_offset / read_offset): decode a window that starts a few
//   tokens back, so that context-dependent decoders (a Metaspace decoder's first-token space) see
//   the same context every time, and hand out only what the new window adds, never while it ends
//   in U+FFFD (an unfinished byte sequence).
// Either way the text before cleanup is streamed; clean_up_tokenization_spaces is then applied by
// CleanupStream, which holds back only a tail the cleanup could still change (cleanup.ts).

import { CleanupStream } from './cleanup.ts';
import { DECODE_INTERNALS, type DecodeInternals } from './hf-tokenizer.ts';
import type { DecodeOptions, Tokenizer } from './types.ts';

interface RawStream {
  push(ids: readonly number[]): string;
  flush(): string;
}

const STREAM = { stream: true } as const;

class ByteStream implements RawStream {
  private readonly utf8 = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

  constructor(
    private readonly bytesOf: (ids: readonly number[], skip: boolean) => Uint8Array,
    private readonly skip: boolean,
  ) {}

  push(ids: readonly number[]): string {
    return this.utf8.decode(this.bytesOf(ids, this.skip), STREAM);
  }

  flush(): string {
    return this.utf8.decode();
  }
}

class WindowStream implements RawStream {
  private readonly all: number[] = [];
  private prefixOffset = 0;
  private readOffset = 0;

  constructor(private readonly decode: (ids: readonly number[]) => string) {}

  push(ids: readonly number[]): string {
    for (const id of ids) this.all.push(id);
    const prefix = this.decode(this.all.slice(this.prefixOffset, this.readOffset));
    const text = this.decode(this.all.slice(this.prefixOffset));
    if (text.length <= prefix.length || text.endsWith('\uFFFD') || !text.startsWith(prefix)) return '';
    this.prefixOffset = this.readOffset;
    this.readOffset = this.all.length;
    return text.slice(prefix.length);
  }

  flush(): string {
    const prefix = this.decode(this.all.slice(this.prefixOffset, this.readOffset));
    const text = this.decode(this.all.slice(this.prefixOffset));
    this.prefixOffset = this.readOffset = this.all.length;
    return text.length > prefix.length ? text.slice(prefix.length) : '';
  }
}

const internalsOf = (tok: Tokenizer): DecodeInternals | undefined => (tok as Partial<Record<typeof DECODE_INTERNALS, DecodeInternals>>)[DECODE_INTERNALS];

export class IncrementalDecoder {
  private readonly raw: RawStream;
  private readonly cleanup: CleanupStream | null;
  private readonly allIds: number[] = [];
  private emitted = '';
  private flushed = false;
  private readonly one: number[] = [0];

  constructor(tok: Tokenizer, opts: DecodeOptions & { /** Tests: force the window algorithm even where bytes would do. */ forceWindow?: boolean } = {}) {
    const skip = opts.skipSpecialTokens ?? true;
    const internals = internalsOf(tok);
    if (internals) {
      this.raw = internals.keptBytes && !opts.forceWindow ? new ByteStream(internals.keptBytes, skip) : new WindowStream((ids) => internals.rawDecode(ids, skip));
      this.cleanup = (opts.cleanUpTokenizationSpaces ?? internals.cleanUp) ? new CleanupStream() : null;
    } else {
      // A Tokenizer of another make: its decode as it is, cleanup included (exact where cleanup is local).
      this.raw = new WindowStream((ids) => tok.decode(ids, opts));
      this.cleanup = null;
    }
  }

  /** The new text that is now stable. */
  push(ids: readonly number[]): string {
    if (this.flushed) throw new Error('IncrementalDecoder: push after flush');
    for (const id of ids) this.allIds.push(id);
    const raw = this.raw.push(ids);
    const out = this.cleanup ? this.cleanup.push(raw) : raw;
    this.emitted += out;
    return out;
  }

  /** push([id]) without the array: one streamed token. */
  pushOne(id: number): string {
    this.one[0] = id;
    return this.push(this.one);
  }

  /** Whatever was held back (call once, at the end of the output). */
  flush(): string {
    if (this.flushed) return '';
    this.flushed = true;
    const raw = this.raw.flush();
    const out = this.cleanup ? this.cleanup.push(raw) + this.cleanup.flush() : raw;
    this.emitted += out;
    return out;
  }

  /** All text emitted so far. */
  get text(): string {
    return this.emitted;
  }

  get ids(): readonly number[] {
    return this.allIds;
  }
}
