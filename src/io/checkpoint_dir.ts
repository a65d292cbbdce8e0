/**
 * Checkpoint directories that survive a crash or Ctrl-C at any moment.
 *
 * Layout of an output directory:
 *
 *   out/
 *     latest.json        {"checkpoint": "step-200", "history": ["step-100", "step-200"]}
 *     step-100/          an older checkpoint, kept while `keep` allows
 *     step-200/          config.json, model.safetensors, … (whatever the caller wrote)
 *
 * A write fills `out/<name>.tmp-<pid>-<n>/`, fsyncs every file and the directory, renames it to
 * `out/<name>/`, then atomically replaces latest.json, then removes the checkpoints beyond `keep`.
 * Until latest.json is replaced, readers keep resolving the previous checkpoint, which is never
 * touched before then. Stale `.tmp-` entries (from a crash) are removed at the start of the next
 * write; one writer per output directory is assumed.
 *
 * `history` lists the checkpoints this code wrote, oldest first; pruning deletes only names found
 * there, never a directory a user put beside them. Readers need only `checkpoint`.
 */
import { CheckpointError, clip, showValue } from '../errors.ts';
import { parseJson } from './json.ts';
import { readRequiredFile } from './model_folder.ts';
import { nodeFolder } from '../platform/node_folder.ts';
import {
  TEMP_MARKER, fsyncDir, isRegularFile, joinPath, listDir, makeDir, makeNewDir, pathKind, readFileIfExists, removePath,
  renamePath, tempPathFor, writeFileAtomic, writeNewFileSynced,
} from '../platform/files.ts';

export { CheckpointError };

/** The pointer file in an output directory. */
export const LATEST_FILE = 'latest.json';
/** The file whose presence marks a directory as a checkpoint itself. */
export const CONFIG_FILE = 'config.json';

interface LatestPointer {
  checkpoint: string;
  history?: string[];
}

export interface WriteCheckpointOptions {
  /** How many checkpoints to keep, the new one included (default 1). */
  keep?: number;
}

/** A checkpoint or file name: one path component, not reserved, not a temporary name. */
function checkName(what: string, name: string, reserved: readonly string[]): void {
  if (typeof name !== 'string' || name === '' || name === '.' || name === '..' || /[\\/\0]/.test(name) || name.includes(TEMP_MARKER) || reserved.includes(name)) {
    throw new CheckpointError(`${what} ${showValue(name)} is not allowed: expected one path component without '/', '\\' or '${TEMP_MARKER}'${reserved.length ? `, not ${reserved.join(' or ')}` : ''}`);
  }
}

/** Parses latest.json; null if absent, CheckpointError if it exists but is malformed. */
async function readLatest(dir: string): Promise<LatestPointer | null> {
  const path = joinPath(dir, LATEST_FILE);
  const bytes = await readFileIfExists(path);
  if (bytes === null) return null;
  const v = parseJson(new TextDecoder().decode(bytes), (why) => new CheckpointError(`${path}: ${why}: expected {"checkpoint": "<directory name>"}`));
  const p = v as Partial<LatestPointer> | null;
  if (typeof p !== 'object' || p === null || typeof p.checkpoint !== 'string' || p.checkpoint === '') {
    throw new CheckpointError(`${path} holds ${clip(JSON.stringify(v) ?? String(v))}: expected {"checkpoint": "<directory name>"}`);
  }
  // The pointer stays inside its run folder: one path component ("../other-run/step-2" would load another run).
  checkName(`${path}: checkpoint`, p.checkpoint, []);
  const history = Array.isArray(p.history) ? p.history.filter((h): h is string => typeof h === 'string') : undefined;
  return { checkpoint: p.checkpoint, history };
}

/** Removes `<anything>.tmp-<…>` entries left by an interrupted write. */
async function removeStaleTemps(outDir: string): Promise<void> {
  for (const entry of await listDir(outDir)) {
    if (entry.includes(TEMP_MARKER)) await removePath(joinPath(outDir, entry));
  }
}

/**
 * Writes `files` as checkpoint `name` under `outDir` and points latest.json at it, then prunes
 * older checkpoints beyond `keep`. If anything fails (a file's data cannot be read, the disk is
 * full, the directory is read-only), the temporary directory is removed, latest.json and the
 * previous checkpoint are untouched, and a CheckpointError says what failed. Writing a name that
 * already exists replaces it (the old copy is moved aside first, then removed).
 * Returns the checkpoint's path.
 */
export async function writeCheckpointDir(outDir: string, name: string, files: Record<string, Uint8Array | string>, opts: WriteCheckpointOptions = {}): Promise<string> {
  const keep = opts.keep ?? 1;
  if (!Number.isInteger(keep) || keep < 1) throw new CheckpointError(`writeCheckpointDir: keep = ${keep}: expected an integer >= 1`);
  checkName('checkpoint name', name, [LATEST_FILE]);
  const fileNames = Object.keys(files);
  for (const f of fileNames) checkName(`checkpoint '${name}': file name`, f, []);

  const finalDir = joinPath(outDir, name);
  const tmpDir = tempPathFor(finalDir);
  let aside: string | null = null;
  try {
    await makeDir(outDir);
    await removeStaleTemps(outDir);
    await makeNewDir(tmpDir);
    for (const f of fileNames) await writeNewFileSynced(joinPath(tmpDir, f), files[f]);
    await fsyncDir(tmpDir);
    const existing = await pathKind(finalDir);
    if (existing === 'dir') {
      aside = tempPathFor(finalDir);
      await renamePath(finalDir, aside);
    }
    await renamePath(tmpDir, finalDir);
    await fsyncDir(outDir);
  } catch (e) {
    await removePath(tmpDir).catch(() => undefined);
    if (aside !== null && (await pathKind(finalDir)) === null) await renamePath(aside, finalDir).catch(() => undefined);
    throw new CheckpointError(`writing checkpoint '${name}' in ${outDir} failed (${(e as Error).message}); the previous checkpoint is unchanged`);
  }

  // The new directory is complete and durable: switch the pointer, then prune.
  const previous = await readLatest(outDir).catch(() => null);
  // A latest.json without history (written by hand or by other tools) prunes nothing.
  const history = [...(previous?.history ?? []).filter((h) => h !== name), name];
  const kept = history.slice(-keep);
  const pointer: LatestPointer = { checkpoint: name, history: kept };
  try {
    await writeFileAtomic(joinPath(outDir, LATEST_FILE), `${JSON.stringify(pointer)}\n`);
  } catch (e) {
    throw new CheckpointError(`checkpoint '${name}' was written to ${finalDir}, but updating ${joinPath(outDir, LATEST_FILE)} failed (${(e as Error).message}); latest.json still names the previous checkpoint`);
  }
  const stale = history.slice(0, -keep).filter((old) => old !== '' && old !== '.' && old !== '..' && old !== LATEST_FILE && !/[\\/\0]/.test(old));
  try {
    if (aside !== null) await removePath(aside);
    // Only plain names from history: a hand-edited latest.json cannot reach outside outDir.
    for (const old of stale) await removePath(joinPath(outDir, old));
  } catch (e) {
    throw new CheckpointError(`checkpoint '${name}' was written and latest.json points to it, but removing older checkpoints in ${outDir} failed (${(e as Error).message})`);
  }
  return finalDir;
}

/**
 * The checkpoint directory `dir` stands for: the one `dir/latest.json` names, else `dir` itself
 * when it holds config.json. CheckpointError otherwise, naming the path and what was expected.
 */
export async function resolveCheckpointDir(dir: string): Promise<string> {
  const kind = await pathKind(dir);
  if (kind === null) throw new CheckpointError(`no checkpoint at ${dir}: the path does not exist`);
  if (kind !== 'dir') throw new CheckpointError(`no checkpoint at ${dir}: it is not a directory (expected a directory with latest.json or config.json)`);
  const latest = await readLatest(dir);
  if (latest !== null) {
    const target = joinPath(dir, latest.checkpoint);
    if ((await pathKind(target)) !== 'dir') {
      throw new CheckpointError(`${joinPath(dir, LATEST_FILE)} names checkpoint '${latest.checkpoint}', but ${target} is not a directory`);
    }
    return target;
  }
  if (await isRegularFile(joinPath(dir, CONFIG_FILE))) return dir; // a folder or a FIFO named config.json: a FileError
  throw new CheckpointError(`no checkpoint in ${dir}: expected ${LATEST_FILE} or ${CONFIG_FILE}`);
}

/** A file of a checkpoint directory; CheckpointError naming the missing file. */
export function readCheckpointFile(dir: string, name: string): Promise<Uint8Array> {
  return readRequiredFile(nodeFolder(dir), name);
}

/** A checkpoint file read as UTF-8 text (config.json, tokenizer.json, …). */
export async function readCheckpointText(dir: string, name: string): Promise<string> {
  return new TextDecoder().decode(await readCheckpointFile(dir, name));
}
