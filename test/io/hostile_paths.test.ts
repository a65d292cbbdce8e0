/**
 * Paths a user or a hostile folder can hand FON (issue 18, the file-system rows): a folder where a
 * file is expected, a loop of symbolic links, a NUL byte, a name too long for the file system and
 * a FIFO. Each is a FileError that names the path and says in words what is wrong — from the
 * platform adapters (platform/files.ts, train/data/files.ts), the safetensors reader, and the CLI
 * (exit 2, one line, no stack trace) — and a FIFO is refused before it is opened, so nothing waits.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileError, clip } from '../../src/errors.ts';
import { isRegularFile, listDir, pathKind, readFileIfExists, writeFileAtomic } from '../../src/platform/files.ts';
import { pathKind as dataPathKind, readSmallTextFile } from '../../src/train/data/files.ts';
import { openSafetensorsDir, openSafetensorsFile } from '../../src/platform/node_folder.ts';
import { CheckpointError, resolveCheckpointDir } from '../../src/io/checkpoint_dir.ts';
import { fon } from '../cli/fon_process.ts';

const dir = mkdtempSync(join(tmpdir(), 'fon-hostile-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

const folder = join(dir, 'a-folder');
mkdirSync(folder);
const loop = join(dir, 'loop-a');
symlinkSync(join(dir, 'loop-b'), loop);
symlinkSync(loop, join(dir, 'loop-b'));
const nul = join(dir, 'bad\0name');
const long = join(dir, 'x'.repeat(300));
const fifo = join(dir, 'a-fifo');
execFileSync('mkfifo', [fifo]);

/** A FileError whose message is exactly `${path}: ${action}: ${reason}`. */
function fileError(path: string, action: string, reason: string) {
  return (e: unknown) => e instanceof FileError && e.message === `${path}: ${action}: ${reason}`;
}

test('platform/files.ts: a folder, a link loop, a NUL byte, a long name and a FIFO are FileErrors naming the path', async () => {
  await assert.rejects(readFileIfExists(folder), fileError(folder, 'cannot read', 'it is a folder, expected a file'));
  await assert.rejects(readFileIfExists(loop), fileError(loop, 'cannot look up', 'a loop of symbolic links (ELOOP)'));
  await assert.rejects(pathKind(loop), fileError(loop, 'cannot look up', 'a loop of symbolic links (ELOOP)'));
  await assert.rejects(readFileIfExists(nul), fileError(JSON.stringify(nul), 'cannot read', 'a path with a NUL byte'));
  await assert.rejects(pathKind(long), fileError(clip(long), 'cannot look up', 'a name in the path is too long for the file system (ENAMETOOLONG)'));
  assert.ok(clip(long).endsWith(`… (${long.length} characters)`), 'the long path is cut in the message');
  await assert.rejects(readFileIfExists(fifo), fileError(fifo, 'cannot read', 'not a regular file (a FIFO, a socket or a device)'));
  await assert.rejects(listDir(join(dir, 'missing')), fileError(join(dir, 'missing'), 'cannot list the folder', 'no such file or folder (ENOENT)'));
  await assert.rejects(writeFileAtomic(join(folder, 'no', 'such', 'f.json'), '{}'), (e: unknown) => e instanceof FileError && e.message.includes(': cannot write: no such file or folder (ENOENT)'));
  assert.equal(await readFileIfExists(join(dir, 'missing')), null, 'nothing there is still null');
  assert.equal(await isRegularFile(join(dir, 'missing')), false);
});

test('train/data/files.ts: the same paths as FileErrors; a missing path is still "missing"', () => {
  assert.throws(() => dataPathKind(loop), fileError(loop, 'cannot look up', 'a loop of symbolic links (ELOOP)'));
  assert.throws(() => dataPathKind(nul), fileError(JSON.stringify(nul), 'cannot look up', 'a path with a NUL byte'));
  assert.throws(() => readSmallTextFile(folder), fileError(folder, 'cannot read', 'it is a folder, expected a file (EISDIR)'));
  assert.equal(dataPathKind(join(dir, 'missing')), 'missing');
  assert.equal(dataPathKind(fifo), 'other');
});

test('safetensors: model.safetensors that is a folder, a link loop or a FIFO is a FileError, never a wait', async () => {
  await assert.rejects(openSafetensorsFile(folder), fileError(folder, 'cannot read', 'it is a folder, expected a file'));
  await assert.rejects(openSafetensorsFile(loop), fileError(loop, 'cannot look up', 'a loop of symbolic links (ELOOP)'));
  await assert.rejects(openSafetensorsFile(fifo), fileError(fifo, 'cannot read', 'not a regular file (a FIFO, a socket or a device)'));
  const shards = join(dir, 'shards');
  mkdirSync(join(shards, 'model.safetensors'), { recursive: true });
  await assert.rejects(openSafetensorsDir(shards), fileError(join(shards, 'model.safetensors'), 'cannot read', 'it is a folder, expected a file'));
});

test('fon on a Hugging Face folder whose config.json is a folder or whose weights are a link loop: one line naming the file, exit 2', () => {
  const fix = join(import.meta.dirname, '../fixtures/hf/qwen3');
  const cases: [string, (d: string) => void, string][] = [
    ['config-dir', (d) => { rmSync(join(d, 'config.json')); mkdirSync(join(d, 'config.json')); }, 'config.json: cannot read: it is a folder, expected a file'],
    ['shard-loop', (d) => { const f = join(d, 'model-00002-of-00006.safetensors'); rmSync(f); symlinkSync(f, f); }, 'model-00002-of-00006.safetensors: cannot look up: a loop of symbolic links (ELOOP)'],
  ];
  for (const [name, edit, want] of cases) {
    const d = join(dir, name);
    cpSync(fix, d, { recursive: true });
    edit(d);
    const r = fon('info', '--model', d);
    assert.equal(r.code, 2, `${name}: ${r.err}`);
    assert.ok(r.err.startsWith('fon: ') && r.err.includes(want), `${name}: ${r.err}`);
    assert.equal(r.err.trim().split('\n').length, 1, `${name}: one line: ${r.err}`);
  }
});

test('latest.json stays inside its run folder: a pointer with "..", "/" or a NUL byte is a CheckpointError naming it', async () => {
  const other = join(dir, 'run-b', 'step-000002');
  mkdirSync(other, { recursive: true });
  writeFileSync(join(other, 'config.json'), '{}');
  const run = join(dir, 'run-a');
  mkdirSync(run);
  for (const pointer of ['../run-b/step-000002', '..', 'a/b', 'x\0y']) {
    writeFileSync(join(run, 'latest.json'), JSON.stringify({ checkpoint: pointer }));
    await assert.rejects(resolveCheckpointDir(run), (e: unknown) => e instanceof CheckpointError
      && e.message === `${join(run, 'latest.json')}: checkpoint ${JSON.stringify(pointer)} is not allowed: expected one path component without '/', '\\' or '.tmp-'`, pointer);
  }
  mkdirSync(join(run, 'step-000001'));
  writeFileSync(join(run, 'latest.json'), JSON.stringify({ checkpoint: 'step-000001' }));
  assert.equal(await resolveCheckpointDir(run), join(run, 'step-000001'), 'a plain name still resolves');
});
