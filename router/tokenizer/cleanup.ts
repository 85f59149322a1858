// HF's clean_up_tokenization (transformers, PreTrainedTokenizerBase.clean_up_tokenization), applied
// by decode when tokenizer_config.json says clean_up_tokenization_spaces (Llama 3 does): ten
// string replaces in this order, each one left-to-right and non-overlapping, as Python's
// str.replace and JavaScript's replaceAll both are.

const REPLACES: readonly (readonly [string, string])[] = [
  [' .', '.'],
  [' ?', '?'],
  [' !', '!'],
  [' ,', ','],
  [" ' ", "'"],
  [" n't", "n't"],
  [" 'm", "'m"],
  [" 's", "'s"],
  [" 've", "'ve"],
  [" 're", "'re"],
];

export function cleanUpTokenization(text: string): string {
  if (!text.includes(' ')) return text;
  let out = text;
  for (const [from, to] of REPLACES) out = out.replaceAll(from, to);
  return out;
}

/**
 * Endings after which a later character may complete one of the patterns above: every pattern
 * starts with a space, so these are its proper prefixes. A cut anywhere else is safe: the
 * replaces only ever delete spaces, so no pass can bring a pattern across it, and
 * cleanUp(a + b) === cleanUp(a) + cleanUp(b).
 */
const OPEN_ENDINGS = [' ', " '", ' n', " n'", " 'v", " 'r"] as const;

/** The longest prefix length of `text` after which the cleanup can no longer change (see OPEN_ENDINGS). */
export function cleanupSafeCut(text: string): number {
  let end = text.length;
  for (;;) {
    const open = OPEN_ENDINGS.find((e) => text.endsWith(e, end));
    if (!open) return end;
    end -= 1;
  }
}

/** Streams cleanUpTokenization: the concatenation of what push and flush return equals cleanUp of all the text pushed. */
export class CleanupStream {
  private pending = '';

  push(raw: string): string {
    if (raw === '') return '';
    this.pending += raw;
    const cut = cleanupSafeCut(this.pending);
    if (cut === 0) return '';
    const out = cleanUpTokenization(this.pending.slice(0, cut));
    this.pending = this.pending.slice(cut);
    return out;
  }

  flush(): string {
    const out = cleanUpTokenization(this.pending);
    this.pending = '';
    return out;
  }
}
