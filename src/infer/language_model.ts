/**
 * A loaded model ready to use: its decoder, tokenizer, and what its folder says about generating
 * (a Hugging Face folder's generation_config.json defaults, prefix and eos ids, chat template), so
 * that `generate`, `stream`, `chat`, `chatStream` and `eval` behave as `fon generate`, `fon chat`
 * and `fon eval` do without the caller restating any of it. Browser-safe; fon.load (Node,
 * src/io/load.ts) builds one from a folder.
 */
import type { Decoder } from '../model/decoder.ts';
import type { Tokenizer } from '../io/tokenizer/tokenizer.ts';
import type { HfGenerationDefaults } from '../io/hf/generation.ts';
import type { ChatMessage, ChatTemplate } from '../io/hf/chat_template.ts';
import { ArgumentError } from '../errors.ts';
import { evaluate, type EvalResult } from '../eval/perplexity.ts';
import { tokenByteLengths } from '../eval/token_bytes.ts';
import { evalWindows } from '../train/data/batches.ts';
import { generate, type GenerateOptions, type GenerateResult } from './generate.ts';
import { streamText } from './stream.ts';

/** Sampling defaults: FON's, or those a Hugging Face generation_config.json implies in transformers. */
export function samplingDefaults(g: HfGenerationDefaults | null | undefined): { maxTokens: number; temperature: number; topK: number; topP: number; repetitionPenalty: number } {
  if (!g) return { maxTokens: 200, temperature: 0.8, topK: 0, topP: 1, repetitionPenalty: 1 };
  const sample = g.doSample === true;
  return {
    maxTokens: g.maxNewTokens ?? 200,
    temperature: sample ? g.temperature ?? 1 : 0,
    topK: sample ? g.topK ?? 50 : 0,
    topP: sample ? g.topP ?? 1 : 1,
    repetitionPenalty: g.repetitionPenalty ?? 1,
  };
}

/**
 * The generate options a loaded folder implies: its sampling defaults and, for a Hugging Face
 * model, its tokenizer's prefix ids, its eos ids and special tokens in the prompt (what the CLI's
 * sampling flags and LanguageModel start from).
 */
export function folderDefaults(parts: Pick<LanguageModelParts, 'tokenizer' | 'architecture' | 'generation'>): GenerateOptions & ReturnType<typeof samplingDefaults> {
  return {
    ...samplingDefaults(parts.generation),
    ...(parts.architecture !== undefined ? { startIds: parts.tokenizer.prefixIds, stopIds: parts.generation?.eosTokenIds ?? [], specialInPrompt: true } : {}),
  };
}

/** What a loaded folder holds (LoadedModel's fields). */
export interface LanguageModelParts {
  model: Decoder;
  tokenizer: Tokenizer;
  /** For a Hugging Face folder: its model_type (its prefix ids, eos ids and special tokens apply). */
  architecture?: string;
  generation?: HfGenerationDefaults | null;
  chatTemplate?: ChatTemplate | null;
}

export class LanguageModel {
  readonly model: Decoder;
  readonly tokenizer: Tokenizer;
  readonly chatTemplate: ChatTemplate | null;

  constructor(private readonly parts: LanguageModelParts) {
    this.model = parts.model;
    this.tokenizer = parts.tokenizer;
    this.chatTemplate = parts.chatTemplate ?? null;
  }

  /** The options every call starts from (folderDefaults). */
  defaults(): GenerateOptions {
    return folderDefaults(this.parts);
  }

  /** The continuation of `prompt` (opts over the defaults). */
  generate(prompt: string, opts: GenerateOptions = {}): Promise<GenerateResult> {
    return generate(this.model, this.tokenizer, prompt, { ...this.defaults(), ...opts });
  }

  /** The continuation of `prompt` as it is generated: `for await (const piece of m.stream(prompt, { signal }))`. */
  stream(prompt: string, opts: GenerateOptions = {}): AsyncGenerator<string, GenerateResult, undefined> {
    return streamText(this.model, this.tokenizer, prompt, { ...this.defaults(), ...opts });
  }

  /** The prompt the chat template makes of `messages`, the assistant's turn opened (ArgumentError without a template). */
  chatPrompt(messages: readonly ChatMessage[]): string {
    if (!this.chatTemplate) throw new ArgumentError('chat: this model has no chat template (chat_template.jinja, or chat_template in tokenizer_config.json)');
    return this.chatTemplate.render(messages);
  }

  /** The assistant's reply to `messages`. */
  async chat(messages: readonly ChatMessage[], opts: GenerateOptions = {}): Promise<GenerateResult> {
    return this.generate(this.chatPrompt(messages), opts);
  }

  /** The assistant's reply to `messages` as it is generated. */
  async *chatStream(messages: readonly ChatMessage[], opts: GenerateOptions = {}): AsyncGenerator<string, GenerateResult, undefined> {
    return yield* this.stream(this.chatPrompt(messages), opts);
  }

  /**
   * Perplexity and bits per byte of `text` (one document), scored as `fon eval --file` scores a
   * file: windows of `context` tokens (default the model's) every `stride` (default `context`).
   */
  async eval(text: string, opts: { context?: number; stride?: number; batch?: number } = {}): Promise<EvalResult> {
    const ids = Int32Array.from(this.tokenizer.encode(text));
    const context = opts.context ?? this.model.config.contextLength;
    const store = { length: ids.length, read: (start: number, n: number) => ids.slice(start, start + n), close: () => {} };
    return evaluate(this.model, evalWindows(store, context, opts.stride ?? context), { byteLengths: tokenByteLengths(this.tokenizer, this.model.config.vocabSize), batch: opts.batch, draftLayers: null });
  }

  /** Frees the model's tensors. */
  dispose(): void {
    this.model.dispose();
  }
}
