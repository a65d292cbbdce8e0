/** Chat templates the tests render, and a model folder with one. */
import { copyFileSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** ChatML, as Qwen's templates write it (without their tool and thinking branches). */
export const CHATML = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/** test/fixtures/hf/qwen3 as `dir/name` with CHATML in its tokenizer_config.json (the weights linked, not copied). */
export function chatModelFolder(dir: string, name = 'qwen3-chat'): string {
  const fixture = join(import.meta.dirname, '../fixtures/hf/qwen3');
  const out = join(dir, name);
  mkdirSync(out);
  for (const f of readdirSync(fixture)) (f.endsWith('.safetensors') ? symlinkSync : copyFileSync)(join(fixture, f), join(out, f));
  const cfg = JSON.parse(readFileSync(join(fixture, 'tokenizer_config.json'), 'utf8'));
  writeFileSync(join(out, 'tokenizer_config.json'), JSON.stringify({ ...cfg, chat_template: CHATML }));
  return out;
}
