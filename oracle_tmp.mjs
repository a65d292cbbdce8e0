import { Tokenizer } from '@huggingface/tokenizers';
import { readFileSync } from 'node:fs';
for (const f of ['sentencepiece_legacy', 'sentencepiece_metaspace']) {
  const json = JSON.parse(readFileSync(`/tmp/sp/test/fixtures/tokenizer/${f}.json`, 'utf8'));
  const tok = new Tokenizer(json, {});
  for (const text of ['Hello World', ' the cat and the hat', 'Hé 😀 ok\n', 'I want']) {
    const enc = tok.encode(text, { add_special_tokens: false });
    console.log(f, JSON.stringify(text), JSON.stringify(enc.ids ?? enc), JSON.stringify(tok.decode(enc.ids ?? enc, { skip_special_tokens: false })));
  }
}
