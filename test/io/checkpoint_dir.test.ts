/** Checkpoint directories and atomic files: a failure at any step leaves the previous checkpoint pointed to. */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CheckpointError, readCheckpointFile, readCheckpointText, resolveCheckpointDir, writeCheckpointDir,
} from '../../src/io/checkpoint_dir.ts';
import { writeFileAtomic } from '../../src/platform/files.ts';

const made: string[] = [];
async function scratch(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'fon-ckpt-'));
  made.push(d);
  return d;
}
after(async () => { for (const d of made) await rm(d, { recursive: true, force: true }); });

const latestOf = async (dir: string) => JSON.parse(await readFile(join(dir, 'latest.json'), 'utf8'));
const sorted = async (dir: string) => (await readdir(dir)).sort();

async function rejectsWith(p: Promise<unknown>, fragment: string): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof CheckpointError, `expected CheckpointError, got ${String(e)}`);
    assert.ok(e.message.includes(fragment), `message ${JSON.stringify(e.message)} lacks ${JSON.stringify(fragment)}`);
    return true;
  });
}

test('writeFileAtomic replaces the contents and leaves no temporary file', async () => {
  const dir = await scratch();
  const p = join(dir, 'a.json');
  await writeFileAtomic(p, 'one');
  await writeFileAtomic(p, new Uint8Array([0x74, 0x77, 0x6f]));
  assert.equal(await readFile(p, 'utf8'), 'two');
  assert.deepEqual(await sorted(dir), ['a.json']);
});

test('writeFileAtomic: on failure the old file stays and the temporary is removed', async () => {
  const dir = await scratch();
  const p = join(dir, 'a.json');
  await writeFileAtomic(p, 'old');
  await assert.rejects(writeFileAtomic(p, 42 as unknown as string), /expected file contents as a Uint8Array or a string, got number/);
  assert.equal(await readFile(p, 'utf8'), 'old');
  assert.deepEqual(await sorted(dir), ['a.json']);
  // A directory where the file should go: the rename fails after the temp was written.
  await mkdir(join(dir, 'taken'));
  await writeFile(join(dir, 'taken', 'x'), 'x');
  await assert.rejects(writeFileAtomic(join(dir, 'taken'), 'data'));
  assert.deepEqual(await sorted(dir), ['a.json', 'taken']);
});

test('writes a checkpoint, points latest.json at it, resolves and reads it back', async () => {
  const out = join(await scratch(), 'run');
  const path = await writeCheckpointDir(out, 'step-1', { 'config.json': '{"d":4}', 'model.safetensors': new Uint8Array([1, 2, 3]) });
  assert.equal(path, join(out, 'step-1'));
  assert.deepEqual(await sorted(out), ['latest.json', 'step-1']);
  assert.equal((await latestOf(out)).checkpoint, 'step-1');
  assert.equal(await resolveCheckpointDir(out), join(out, 'step-1'));
  assert.equal(await resolveCheckpointDir(join(out, 'step-1')), join(out, 'step-1'), 'a checkpoint directory resolves to itself');
  assert.deepEqual([...await readCheckpointFile(path, 'model.safetensors')], [1, 2, 3]);
  assert.equal(await readCheckpointText(path, 'config.json'), '{"d":4}');
  await rejectsWith(readCheckpointFile(path, 'tokenizer.json'), `checkpoint ${path} has no tokenizer.json (looked for ${join(path, 'tokenizer.json')})`);
});

test('keep: older checkpoints beyond keep are removed, a user directory beside them never', async () => {
  const out = await scratch();
  await mkdir(join(out, 'my-notes'));
  for (let i = 1; i <= 4; i++) await writeCheckpointDir(out, `step-${i}`, { 'config.json': `${i}` }, { keep: 2 });
  assert.deepEqual(await sorted(out), ['latest.json', 'my-notes', 'step-3', 'step-4']);
  assert.deepEqual(await latestOf(out), { checkpoint: 'step-4', history: ['step-3', 'step-4'] });
  await writeCheckpointDir(out, 'step-5', { 'config.json': '5' });
  assert.deepEqual(await sorted(out), ['latest.json', 'my-notes', 'step-5']);
  // Rewriting the current name replaces it in place.
  await writeCheckpointDir(out, 'step-5', { 'config.json': 'again' });
  assert.deepEqual(await sorted(out), ['latest.json', 'my-notes', 'step-5']);
  assert.equal(await readCheckpointText(join(out, 'step-5'), 'config.json'), 'again');
  await rejectsWith(writeCheckpointDir(out, 'x', {}, { keep: 0 }), 'keep = 0: expected an integer >= 1');
});

test('a failure mid-write (a file whose data throws) leaves the previous checkpoint intact and pointed to', async () => {
  const out = await scratch();
  await writeCheckpointDir(out, 'step-1', { 'config.json': 'one', 'model.safetensors': new Uint8Array([1]) });
  const files: Record<string, Uint8Array | string> = { 'config.json': 'two' };
  Object.defineProperty(files, 'model.safetensors', { enumerable: true, get() { throw new Error('GPU read failed'); } });
  await rejectsWith(writeCheckpointDir(out, 'step-2', files), "writing checkpoint 'step-2' in " + out + ' failed (GPU read failed); the previous checkpoint is unchanged');
  assert.deepEqual(await sorted(out), ['latest.json', 'step-1'], 'no temporary directory and no step-2 left');
  assert.equal((await latestOf(out)).checkpoint, 'step-1');
  assert.equal(await readCheckpointText(await resolveCheckpointDir(out), 'config.json'), 'one');
});

test('a failure at the rename (the name is taken by a file) leaves everything as it was', async () => {
  const out = await scratch();
  await writeCheckpointDir(out, 'step-1', { 'config.json': 'one' });
  await writeFile(join(out, 'step-2'), 'not a directory');
  await rejectsWith(writeCheckpointDir(out, 'step-2', { 'config.json': 'two' }), "writing checkpoint 'step-2'");
  assert.deepEqual(await sorted(out), ['latest.json', 'step-1', 'step-2']);
  assert.equal(await readFile(join(out, 'step-2'), 'utf8'), 'not a directory');
  assert.equal(await resolveCheckpointDir(out), join(out, 'step-1'));
});

test('a read-only output directory: the write fails, the previous checkpoint stays', async (t) => {
  if (process.getuid?.() === 0) { t.skip('root ignores directory permissions'); return; }
  const out = await scratch();
  await writeCheckpointDir(out, 'step-1', { 'config.json': 'one' });
  await chmod(out, 0o555);
  try {
    await rejectsWith(writeCheckpointDir(out, 'step-2', { 'config.json': 'two' }), "writing checkpoint 'step-2'");
  } finally {
    await chmod(out, 0o755);
  }
  assert.deepEqual(await sorted(out), ['latest.json', 'step-1']);
  assert.equal((await latestOf(out)).checkpoint, 'step-1');
});

test('stale .tmp- entries from a crash are removed on the next write', async () => {
  const out = await scratch();
  await writeCheckpointDir(out, 'step-1', { 'config.json': 'one' });
  await mkdir(join(out, 'step-2.tmp-999-0'));
  await writeFile(join(out, 'step-2.tmp-999-0', 'config.json'), 'half');
  await writeFile(join(out, 'latest.json.tmp-999-1'), '{"checkp');
  assert.equal(await resolveCheckpointDir(out), join(out, 'step-1'), 'a crash leaves the previous checkpoint resolvable');
  await writeCheckpointDir(out, 'step-2', { 'config.json': 'two' });
  assert.deepEqual(await sorted(out), ['latest.json', 'step-2']);
});

test('bad names are refused before anything is written', async () => {
  const out = await scratch();
  await rejectsWith(writeCheckpointDir(out, '../escape', {}), 'checkpoint name "../escape" is not allowed');
  await rejectsWith(writeCheckpointDir(out, 'latest.json', {}), 'not latest.json');
  await rejectsWith(writeCheckpointDir(out, 'a.tmp-1', {}), "without '/', '\\' or '.tmp-'");
  await rejectsWith(writeCheckpointDir(out, 'ok', { 'sub/file': 'x' }), `checkpoint 'ok': file name "sub/file" is not allowed`);
  assert.deepEqual(await sorted(out), []);
});

test('resolveCheckpointDir errors name the path and what was expected', async () => {
  const dir = await scratch();
  await rejectsWith(resolveCheckpointDir(dir), `no checkpoint in ${dir}: expected latest.json or config.json`);
  await rejectsWith(resolveCheckpointDir(join(dir, 'nope')), `no checkpoint at ${join(dir, 'nope')}: the path does not exist`);
  await writeFile(join(dir, 'f'), '');
  await rejectsWith(resolveCheckpointDir(join(dir, 'f')), 'it is not a directory');
  await writeFile(join(dir, 'latest.json'), '{"checkpoint": "gone"}');
  await rejectsWith(resolveCheckpointDir(dir), `${join(dir, 'latest.json')} names checkpoint 'gone', but ${join(dir, 'gone')} is not a directory`);
  await writeFile(join(dir, 'latest.json'), '{"check');
  await rejectsWith(resolveCheckpointDir(dir), `${join(dir, 'latest.json')}: not valid JSON`);
  await writeFile(join(dir, 'latest.json'), '{"step": 3}');
  await rejectsWith(resolveCheckpointDir(dir), `holds {"step":3}: expected {"checkpoint": "<directory name>"}`);
  // A hand-written pointer without history is honoured, and its target is never pruned.
  await mkdir(join(dir, 'mine'));
  await writeFile(join(dir, 'latest.json'), '{"checkpoint": "mine"}');
  assert.equal(await resolveCheckpointDir(dir), join(dir, 'mine'));
  await writeCheckpointDir(dir, 'step-1', { 'config.json': '{}' });
  assert.ok((await readdir(dir)).includes('mine'));
});
