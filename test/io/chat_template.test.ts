/**
 * Chat templates (io/hf/chat_template.ts): tokenizer_config.json's chat_template (a string or a
 * list with a "default" entry) and chat_template.jinja rendered as transformers renders them
 * (messages, add_generation_prompt, bos/eos tokens), raise_exception and broken templates refused
 * naming the file, and --messages files checked entry by entry.
 * Run: node --import tsx --test test/io/chat_template.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ChatTemplate, chatTemplateOf, parseMessages } from '../../src/io/hf/chat_template.ts';
import { ConfigError } from '../../src/errors.ts';
import { CHATML } from './chat_fixtures.ts';

const LLAMA2 = "{{ bos_token }}{% for m in messages %}{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if m.role == 'user' %}{{ '[INST] ' + m.content + ' [/INST]' }}{% else %}{{ ' ' + m.content + ' ' + eos_token }}{% endif %}{% endfor %}";

const chat = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }];

test('a string chat_template renders the conversation and opens the assistant\'s turn', () => {
  const t = chatTemplateOf({ chat_template: CHATML, eos_token: '<|im_end|>' }, 'tokenizer_config.json')!;
  assert.equal(t.render(chat), '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n');
  assert.equal(t.render(chat, { addGenerationPrompt: false }), '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n');
});

test('bos and eos tokens (strings or {content}) reach the template; raise_exception refuses by the file\'s name', () => {
  const t = chatTemplateOf({ chat_template: LLAMA2, bos_token: { content: '<s>' }, eos_token: '</s>' }, 'llama/tokenizer_config.json')!;
  assert.equal(t.render([{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello!' }, { role: 'user', content: 'Bye' }]), '<s>[INST] Hi [/INST] Hello! </s>[INST] Bye [/INST]');
  assert.throws(() => t.render([{ role: 'assistant', content: 'first' }]), (e) => e instanceof ConfigError && e.message.startsWith('llama/tokenizer_config.json: the chat template failed to render: ') && e.message.includes('Conversation roles must alternate user/assistant/user/assistant/...'));
});

test('a list of named templates takes "default"; chat_template.jinja wins over the config; none gives null', () => {
  const t = chatTemplateOf({ chat_template: [{ name: 'tool_use', template: 'TOOLS' }, { name: 'default', template: CHATML }] }, 'c.json')!;
  assert.ok(t.render(chat).endsWith('<|im_start|>assistant\n'));
  assert.equal(t.source, 'c.json (chat_template "default")');
  const j = chatTemplateOf({ chat_template: 'IGNORED' }, 'c.json', { text: '{{ messages[0].content }}!', source: 'dir/chat_template.jinja' })!;
  assert.equal(j.render(chat), 'Be brief.!');
  assert.equal(j.source, 'dir/chat_template.jinja');
  assert.equal(chatTemplateOf({ eos_token: 'x' }, 'c.json'), null);
  assert.equal(chatTemplateOf(undefined, 'c.json'), null);
});

test('broken templates and malformed fields are ConfigErrors naming the file', () => {
  assert.throws(() => new ChatTemplate('{% for m in messages %}', 'x/chat_template.jinja'), (e) => e instanceof ConfigError && e.message.startsWith('x/chat_template.jinja: the chat template does not parse: '));
  assert.throws(() => new ChatTemplate('{{ messages[0].content.nope() }}', 'y.jinja').render(chat), (e) => e instanceof ConfigError && e.message.startsWith('y.jinja: the chat template failed to render: '));
  assert.throws(() => chatTemplateOf({ chat_template: 7 }, 'c.json'), (e) => e instanceof ConfigError && e.message === 'c.json: chat_template must be a string or a list of {name, template}; got 7');
  assert.throws(() => chatTemplateOf({ chat_template: [{ name: 'tool_use', template: 'T' }] }, 'c.json'), /c\.json: chat_template is a list without a "default" entry/);
});

test('parseMessages: a non-empty list of {role, content}; each fault named by its entry', () => {
  assert.deepEqual(parseMessages([{ role: 'user', content: 'a', extra: 1 }], 'm.json'), [{ role: 'user', content: 'a' }]);
  const bad: [unknown, string][] = [
    [[], 'm.json: expected a non-empty list of {"role", "content"} messages; got []'],
    [{ role: 'user' }, 'm.json: expected a non-empty list of {"role", "content"} messages; got {"role":"user"}'],
    [[{ role: 'user', content: 'a' }, 'hi'], 'm.json: message 1 must be an object {"role", "content"}; got "hi"'],
    [[{ content: 'a' }], 'm.json: message 0: "role" must be a non-empty string; got undefined'],
    [[{ role: 'user', content: 3 }], 'm.json: message 0: "content" must be a string; got 3'],
  ];
  for (const [json, msg] of bad) assert.throws(() => parseMessages(json, 'm.json'), (e) => e instanceof ConfigError && e.message === msg, msg);
});
