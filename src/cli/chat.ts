/**
 * `fon chat`: an interactive conversation with a chat model. Each line read is the user's turn;
 * the model's chat template makes the prompt of the whole conversation so far, and the reply
 * streams to stdout as it is generated. `/reset` starts over (keeping --system), Ctrl-D (the end
 * of input) exits; a piped stdin works the same, a line at a time.
 */
import { createInterface } from 'node:readline';
import { loadModel } from '../io/model_checkpoint.ts';
import { generate } from '../infer/generate.ts';
import type { ChatMessage } from '../io/hf/chat_template.ts';
import { parseFlags, requireFlag } from './args.ts';
import { backendFromFlag, dtypeFromFlag, DTYPE_USAGE } from './backend_flag.ts';
import { chatPrompt } from './prompt_input.ts';
import { SAMPLING_FLAGS, samplingOptions } from './sampling_flags.ts';

export const CHAT_USAGE = `usage: fon chat --model DIR [--system TEXT] [options]

Talks with the chat model in DIR (a Hugging Face folder with a chat template: chat_template.jinja, or
chat_template in tokenizer_config.json). Type a message and Enter; the reply streams back. /reset
starts a new conversation; Ctrl-D exits. Standard input may be piped: one message a line.

options:
  --system TEXT      a system message at the start of every conversation
  --max-tokens N     tokens a reply has at most (default: generation_config.json's, else 200)
  --temperature T    0 = greedy (default: generation_config.json's, else 0.8)
  --top-k K          keep the K most likely tokens
  --top-p P          keep the smallest set with probability ≥ P
  --repetition-penalty R
  --seed S           sampling seed (default 0)
  --backend NAME     cpu, wasm, webgpu or auto (default)
${DTYPE_USAGE}`;

export async function chatCommand(argv: string[]): Promise<number> {
  const { values: v } = parseFlags('chat', argv, { model: { type: 'string' }, system: { type: 'string' }, backend: { type: 'string' }, dtype: { type: 'string' }, ...SAMPLING_FLAGS });
  if (v.help) { console.log(CHAT_USAGE); return 0; }
  const dir = requireFlag('chat', 'model', v.model);
  const backend = await backendFromFlag('chat', v.backend);
  const loaded = await loadModel(dir, backend, { dtype: dtypeFromFlag('chat', v.dtype) });
  const { model, tokenizer } = loaded;
  try {
    const opts = samplingOptions('chat', v, loaded);
    const start: ChatMessage[] = v.system !== undefined ? [{ role: 'system', content: v.system }] : [];
    chatPrompt('chat', dir, loaded.chatTemplate, [...start, { role: 'user', content: '' }]); // refuses a model without a template before the first turn
    let messages = [...start];
    const tty = process.stdin.isTTY === true;
    const lines = createInterface({ input: process.stdin, terminal: tty });
    const ask = () => { if (tty) process.stdout.write('> '); };
    ask();
    for await (const line of lines) {
      const text = line.trim();
      if (text === '') { ask(); continue; }
      if (text === '/reset') {
        messages = [...start];
        console.error('(a new conversation)');
        ask();
        continue;
      }
      messages.push({ role: 'user', content: line });
      const prompt = chatPrompt('chat', dir, loaded.chatTemplate, messages);
      const r = await generate(model, tokenizer, prompt, { ...opts, truncatePrompt: true, onText: (s) => process.stdout.write(s), onWarning: (m) => console.error(`fon: warning: ${m}`) });
      process.stdout.write('\n');
      messages.push({ role: 'assistant', content: r.text });
      ask();
    }
    return 0;
  } finally {
    model.dispose();
  }
}
