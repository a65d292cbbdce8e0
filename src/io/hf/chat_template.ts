/**
 * A Hugging Face model's chat template: the Jinja text in tokenizer_config.json's `chat_template`
 * (a string, or a list of {name, template} whose "default" one is taken) or in the folder's
 * `chat_template.jinja` (which transformers writes and prefers), rendered with @huggingface/jinja
 * as transformers' apply_chat_template renders it: `messages`, `add_generation_prompt`, the
 * tokenizer's `bos_token` and `eos_token`, and `raise_exception` (templates call it to refuse a
 * conversation; the renderer provides it). A template that does not parse, or that fails or
 * refuses to render, is a ConfigError naming its file.
 */
import { Template } from '@huggingface/jinja';
import { ConfigError, clip, showValue } from '../../errors.ts';

/** One turn of a conversation. */
export interface ChatMessage { role: string; content: string }

/** A token named in tokenizer_config.json: a string, or an object with `content` (older files). */
function tokenText(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object' && typeof (v as { content?: unknown }).content === 'string') return (v as { content: string }).content;
  return undefined;
}

export class ChatTemplate {
  private readonly template: Template;

  /** `text`: the Jinja source; `source`: its file, for messages; `tokens`: bos_token and eos_token. */
  constructor(readonly text: string, readonly source: string, private readonly tokens: { bos_token?: string; eos_token?: string } = {}) {
    try {
      this.template = new Template(text);
    } catch (e) {
      throw new ConfigError(`${source}: the chat template does not parse: ${clip((e as Error).message)}`);
    }
  }

  /** The prompt for `messages`, ending with the assistant's turn opened unless `addGenerationPrompt` is false. */
  render(messages: readonly ChatMessage[], opts: { addGenerationPrompt?: boolean } = {}): string {
    try {
      // @huggingface/jinja provides raise_exception itself: a template's refusal comes out as its error.
      return this.template.render({ messages, add_generation_prompt: opts.addGenerationPrompt ?? true, ...this.tokens });
    } catch (e) {
      throw new ConfigError(`${this.source}: the chat template failed to render: ${clip((e as Error).message)}`);
    }
  }
}

/**
 * The chat template of a folder: `jinjaFile`'s text when given (chat_template.jinja), else
 * tokenizer_config.json's `chat_template`; null when neither has one.
 */
export function chatTemplateOf(tokenizerConfig: unknown, configSource: string, jinja?: { text: string; source: string }): ChatTemplate | null {
  const cfg = tokenizerConfig && typeof tokenizerConfig === 'object' ? tokenizerConfig as Record<string, unknown> : {};
  const tokens = { bos_token: tokenText(cfg.bos_token), eos_token: tokenText(cfg.eos_token) };
  if (jinja) return new ChatTemplate(jinja.text, jinja.source, tokens);
  const t = cfg.chat_template;
  if (t === undefined || t === null) return null;
  if (typeof t === 'string') return new ChatTemplate(t, configSource, tokens);
  if (Array.isArray(t)) {
    const named = t.find((x) => x && typeof x === 'object' && (x as { name?: unknown }).name === 'default') as { template?: unknown } | undefined;
    if (named && typeof named.template === 'string') return new ChatTemplate(named.template, `${configSource} (chat_template "default")`, tokens);
    throw new ConfigError(`${configSource}: chat_template is a list without a "default" entry of {name, template}`);
  }
  throw new ConfigError(`${configSource}: chat_template must be a string or a list of {name, template}; got ${showValue(t)}`);
}

/** A conversation from parsed JSON: a non-empty list of {role, content} with string values; errors name the entry. */
export function parseMessages(json: unknown, source: string): ChatMessage[] {
  if (!Array.isArray(json) || json.length === 0) throw new ConfigError(`${source}: expected a non-empty list of {"role", "content"} messages; got ${showValue(json)}`);
  return json.map((m, i) => {
    if (!m || typeof m !== 'object' || Array.isArray(m)) throw new ConfigError(`${source}: message ${i} must be an object {"role", "content"}; got ${showValue(m)}`);
    const { role, content } = m as Record<string, unknown>;
    if (typeof role !== 'string' || role === '') throw new ConfigError(`${source}: message ${i}: "role" must be a non-empty string; got ${showValue(role)}`);
    if (typeof content !== 'string') throw new ConfigError(`${source}: message ${i}: "content" must be a string; got ${showValue(content)}`);
    return { role, content };
  });
}
