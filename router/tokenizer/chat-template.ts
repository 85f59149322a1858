// Chat templates, rendered as HF's apply_chat_template renders them (transformers,
// utils/chat_template_utils.py: a sandboxed jinja2 environment with trim_blocks and lstrip_blocks,
// `raise_exception` and `strftime_now` as globals, and the variables messages, tools,
// add_generation_prompt plus the special tokens and the caller's kwargs). @huggingface/jinja is
// HF's own JavaScript port of that subset (trim_blocks and lstrip_blocks are on in its Template),
// loaded by jinja.ts with its class fields as assignments (several times faster to render).

import type { Environment, Template } from '@huggingface/jinja';
import { jinja, type Jinja } from './jinja.ts';
import { TemplateError, type ChatMessage, type ChatTemplateOptions } from './types.ts';

/** The templates a model directory carries: a default one and named ones (tokenizer_config's list form). */
export interface TemplateSources {
  default: string | null;
  named: ReadonlyMap<string, string>;
}

/** Reads tokenizer_config.json's chat_template: a string, or a list of {name, template}. */
export function templatesFromConfig(value: unknown): TemplateSources {
  if (typeof value === 'string') return { default: value, named: new Map() };
  const named = new Map<string, string>();
  if (Array.isArray(value)) {
    for (const entry of value) {
      if (entry && typeof entry === 'object' && typeof entry.name === 'string' && typeof entry.template === 'string') named.set(entry.name, entry.template);
    }
  }
  return { default: named.get('default') ?? null, named };
}

const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const pad = (n: number, w = 2) => String(n).padStart(w, '0');

/** Python's datetime.now().strftime(format) on Linux (glibc, C locale), local time: HF's strftime_now. `%-d` drops the padding. */
export function strftime(date: Date, format: string): string {
  return format.replace(/%(-?)([a-zA-Z%])/g, (all, flag: string, d: string) => {
    const out = directive(date, d, all);
    return flag === '-' && /^\d+$/.test(out) ? String(Number(out)) : out;
  });
}

function directive(date: Date, d: string, all: string): string {
  {
    const h12 = date.getHours() % 12 || 12;
    switch (d) {
      case 'a':
        return DAYS[date.getDay()]!.slice(0, 3);
      case 'A':
        return DAYS[date.getDay()]!;
      case 'b':
        return MONTHS[date.getMonth()]!.slice(0, 3);
      case 'B':
        return MONTHS[date.getMonth()]!;
      case 'd':
        return pad(date.getDate());
      case 'H':
        return pad(date.getHours());
      case 'I':
        return pad(h12);
      case 'j': {
        const start = new Date(date.getFullYear(), 0, 1);
        return pad(Math.floor((date.getTime() - start.getTime()) / 86_400_000) + 1, 3);
      }
      case 'm':
        return pad(date.getMonth() + 1);
      case 'M':
        return pad(date.getMinutes());
      case 'p':
        return date.getHours() < 12 ? 'AM' : 'PM';
      case 'S':
        return pad(date.getSeconds());
      case 'y':
        return pad(date.getFullYear() % 100);
      case 'Y':
        return String(date.getFullYear());
      case 'w':
        return String(date.getDay());
      case '%':
        return '%';
      default:
        return all;
    }
  }
}

/** Python's range(), as @huggingface/jinja's own globals define it. */
function range(start: number, stop?: number, step = 1): number[] {
  if (stop === undefined) {
    stop = start;
    start = 0;
  }
  if (step === 0) throw new Error('range() step must not be zero');
  const out: number[] = [];
  for (let i = start; step > 0 ? i < stop : i > stop; i += step) out.push(i);
  return out;
}

const JINJA_GLOBALS: Readonly<Record<string, unknown>> = { false: false, true: true, none: null, False: false, True: true, None: null, range };

/**
 * How a template takes a message's content (SGLang parser/jinja_template_utils.py
 * detect_jinja_template_content_format, after vLLM's): 'openai' when it iterates the content
 * (`for part in message['content']`, also over `msg` or `m`) or names a media type, else
 * 'string'. SGLang reads jinja2's AST; the source's text says the same for these loops.
 */
export function contentFormat(source: string): 'string' | 'openai' {
  if (/image|audio|video|vision/.test(source)) return 'openai';
  return /\bfor\s+[\w,\s]+?\s+in\s+(?:message|msg|m)\s*(?:\.\s*content\b|\[\s*['"]content['"]\s*\])/.test(source) ? 'openai' : 'string';
}

interface TextPart {
  type: string;
  text: string;
}

/**
 * Messages whose content is a list of text parts, as SGLang's process_content_for_template_format
 * and normalize_tool_content hand them over: a 'string' template gets the parts' text joined with
 * spaces; an 'openai' one the parts, except a tool message's, which is joined too.
 */
function forTemplate(messages: ChatMessage[], format: 'string' | 'openai'): ChatMessage[] {
  if (!messages.some((m) => Array.isArray(m.content))) return messages;
  return messages.map((m) => {
    if (!Array.isArray(m.content) || (format === 'openai' && m.role !== 'tool')) return m;
    return { ...m, content: (m.content as TextPart[]).map((p) => p.text).join(' ') };
  });
}

export class ChatTemplates {
  private readonly compiled = new Map<string, Template>();
  private readonly formats = new Map<string, 'string' | 'openai'>();
  private base: Environment | null = null;

  constructor(
    private readonly sources: TemplateSources,
    /** bos_token, eos_token, ... as the template sees them (HF passes the special tokens map). */
    private readonly specialTokens: Readonly<Record<string, string>>,
    private readonly now: () => Date = () => new Date(),
    /** The jinja build to render with (jinja.ts: the lowered one); tests compare the two. */
    private readonly j: Jinja = jinja(),
  ) {}

  get available(): boolean {
    return this.sources.default !== null || this.sources.named.size > 0;
  }

  /** HF's choice: with tools, a template named "tool_use" if there is one; else "default" (or the only one). */
  private pick(tools: unknown[] | null | undefined): string {
    const { named } = this.sources;
    if (tools && named.has('tool_use')) return named.get('tool_use')!;
    if (this.sources.default !== null) return this.sources.default;
    if (named.size === 1) return [...named.values()][0]!;
    if (named.size === 0) throw new TemplateError('this model has no chat template (tokenizer_config.json has no chat_template and there is no chat_template.jinja)');
    throw new TemplateError(`this model has several chat templates (${[...named.keys()].join(', ')}) and none is named "default"`);
  }

  private compile(source: string): Template {
    let t = this.compiled.get(source);
    if (!t) {
      try {
        t = new this.j.Template(source);
      } catch (err) {
        throw new TemplateError(`the chat template cannot be parsed: ${(err as Error).message}`);
      }
      this.compiled.set(source, t);
    }
    return t;
  }

  /**
   * The variables every render shares (jinja's literals and range, HF's two functions, the
   * special tokens), converted to jinja's values once: each render's own variables live in a
   * child environment, which shadows these as the caller's kwargs overrode them before.
   */
  private shared(): Environment {
    if (this.base) return this.base;
    const env = new this.j.Environment();
    const vars: Record<string, unknown> = {
      ...JINJA_GLOBALS,
      ...this.specialTokens,
      raise_exception: (message: unknown) => {
        throw new Error(String(message));
      },
      strftime_now: (format: unknown) => strftime(this.now(), String(format)),
    };
    for (const [key, value] of Object.entries(vars)) env.set(key, value);
    this.base = env;
    return env;
  }

  render(messages: ChatMessage[], opts: ChatTemplateOptions = {}): string {
    const source = this.pick(opts.tools);
    const template = this.compile(source);
    let format = this.formats.get(source);
    if (format === undefined) this.formats.set(source, (format = contentFormat(source)));
    // Template.render's own globals cannot be replaced (its environment refuses a second
    // declaration), so the environment is built here: the shared variables above, then the
    // caller's kwargs, then the fixed variables (which win over kwargs of the same name).
    const vars: Record<string, unknown> = {
      ...(opts.extra ?? {}),
      messages: forTemplate(messages, format),
      tools: opts.tools ?? null,
      add_generation_prompt: opts.addGenerationPrompt ?? false,
    };
    try {
      const env = new this.j.Environment(this.shared());
      for (const [key, value] of Object.entries(vars)) env.set(key, value);
      return String(new this.j.Interpreter(env).run(template.parsed).value);
    } catch (err) {
      // The template's own refusal (raise_exception) or the engine's words; the front prefixes
      // what failed (request.ts), so the message says it once.
      throw new TemplateError((err as Error).message);
    }
  }
}
