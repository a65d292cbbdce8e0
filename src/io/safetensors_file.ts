/**
 * safetensors files read tensor by tensor from a ModelFile (model_folder.ts: a file on disk, a URL,
 * a Blob, bytes in memory): the 8-byte length and the header
 * are read and validated against the file's size first (io/safetensors.ts
 * `parseSafetensorsHeader`), then each tensor's byte range is read when asked for, so a large
 * checkpoint is never held in memory whole, let alone twice.
 *
 * `SafetensorsShards` reads a folder's weights as one set of tensors: `model.safetensors`, or the
 * shards that `model.safetensors.index.json` lists in its `weight_map` (Hugging Face's layout for
 * large models: `model-00001-of-00006.safetensors`, …).
 */
import { CheckpointError, clip, showValue } from '../errors.ts';
import type { ModelFile, ModelFolder } from './model_folder.ts';
import { readFolderFile } from './model_folder.ts';
import {
  parseSafetensorsHeader, safeTensorToHost, safetensorsHeaderLength, SafetensorsError,
  type SafeTensorInfo, type SafeTensorView, type SafetensorsHeader,
} from './safetensors.ts';
import type { Backend } from '../backend/backend.ts';
import { getBackend } from '../backend/registry.ts';
import type { DType } from '../tensor/dtype.ts';
import { fromHandle, type Tensor } from '../tensor/tensor.ts';
import { parseJson } from './json.ts';

/** Reads exactly `length` bytes at `position`; a short read means the file shrank under us (or lied about its size). */
async function readExactly(file: ModelFile, position: number, length: number): Promise<Uint8Array> {
  const out = await file.read(position, length);
  if (out.length < length) throw new SafetensorsError(`${file.path}: truncated: ended after ${position + out.length} bytes while reading ${length} bytes at ${position}`);
  return out;
}

/** One safetensors file, open for reading: its validated header, and its tensors on demand. */
export class SafetensorsFile {
  private constructor(
    /** The file's path or URL (it starts every error message). */
    readonly path: string,
    private readonly file: ModelFile,
    /** The file's size in bytes when opened. */
    readonly size: number,
    readonly header: SafetensorsHeader,
  ) {}

  /**
   * Reads `file`'s header and validates it against the file's size (the file is closed if it is
   * not valid); a truncated or corrupt one is a SafetensorsError (see `parseSafetensorsHeader`).
   * Node opens a path with platform/node_folder.ts `openSafetensorsFile`.
   */
  static async fromFile(file: ModelFile): Promise<SafetensorsFile> {
    try {
      const size = file.size;
      const prefix = await readExactly(file, 0, Math.min(8, size));
      const headerLen = safetensorsHeaderLength(prefix, size, file.path);
      const header = parseSafetensorsHeader(await readExactly(file, 8, headerLen), size, file.path);
      return new SafetensorsFile(file.path, file, size, header);
    } catch (e) {
      await file.close();
      throw e;
    }
  }

  /** Tensor names in data-section order. */
  names(): string[] {
    return Object.keys(this.header.tensors);
  }

  /** A tensor's dtype, shape and byte range; undefined when the file has no such tensor. */
  info(name: string): SafeTensorInfo | undefined {
    return Object.hasOwn(this.header.tensors, name) ? this.header.tensors[name] : undefined;
  }

  /** Reads one tensor's bytes from the file (a fresh array the caller owns). */
  async read(name: string): Promise<SafeTensorView> {
    const info = this.info(name);
    if (!info) throw new SafetensorsError(`${this.path}: no tensor '${name}'`);
    const data = await readExactly(this.file, this.header.dataStart + info.begin, info.end - info.begin);
    return { dtype: info.dtype, shape: [...info.shape], data };
  }

  /** Reads one tensor onto `backend`, float tensors converted to `dtype` when given (as safetensorsToTensors). */
  async readTensor(name: string, opts: { backend?: Backend; dtype?: DType } = {}): Promise<Tensor> {
    const view = await this.read(name);
    const { host, dtype } = safeTensorToHost(name, view, { dtype: opts.dtype, source: this.path });
    const b = opts.backend ?? getBackend();
    return fromHandle(b, b.upload(host, dtype), view.shape, dtype);
  }

  async close(): Promise<void> {
    await this.file.close();
  }
}

/** The single-file weights of a Hugging Face folder. */
export const SINGLE_WEIGHTS_FILE = 'model.safetensors';
/** The index of a sharded Hugging Face folder. */
export const WEIGHTS_INDEX_FILE = 'model.safetensors.index.json';

/** A shard name from an index: one plain file name, so an index cannot point outside its folder. */
function checkShardName(name: unknown, tensor: string, where: string): string {
  if (typeof name !== 'string' || name === '' || name === '.' || name === '..' || /[\\/\0]/.test(name)) {
    throw new CheckpointError(`${where}: weight_map['${clip(tensor, 120)}'] = ${showValue(name)}: expected a file name in the same folder`);
  }
  return name;
}

/** The tensors of one or more safetensors files, read by name; each name lives in one file. */
export class SafetensorsShards {
  private constructor(
    /** What was opened, for messages: the single file or the index. */
    readonly source: string,
    private readonly files: SafetensorsFile[],
    private readonly owner: Map<string, SafetensorsFile>,
  ) {}

  /**
   * Opens the weights in `folder`: model.safetensors when present, else the shards listed by
   * model.safetensors.index.json. Errors name the file: neither present, an index that is not
   * JSON or has no `weight_map`, a shard that is missing, a tensor the index places in a shard
   * that does not hold it; a shard that is not valid safetensors is a SafetensorsError. Node opens
   * a directory with platform/node_folder.ts `openSafetensorsDir`.
   */
  static async fromFolder(folder: ModelFolder): Promise<SafetensorsShards> {
    const single = await folder.open(SINGLE_WEIGHTS_FILE);
    if (single) {
      const file = await SafetensorsFile.fromFile(single);
      return new SafetensorsShards(file.path, [file], new Map(file.names().map((n) => [n, file])));
    }
    const indexPath = folder.pathOf(WEIGHTS_INDEX_FILE);
    const bytes = await readFolderFile(folder, WEIGHTS_INDEX_FILE);
    if (bytes === null) throw new CheckpointError(`${folder.path} has no weights: expected ${SINGLE_WEIGHTS_FILE} or ${WEIGHTS_INDEX_FILE} (FON reads safetensors only)`);
    const index = parseJson(new TextDecoder().decode(bytes), (why) => new CheckpointError(`${indexPath}: ${why}`));
    const map = (index as { weight_map?: unknown } | null)?.weight_map;
    if (typeof map !== 'object' || map === null || Array.isArray(map)) {
      throw new CheckpointError(`${indexPath}: expected an object with "weight_map": {tensor name: shard file}, got ${showValue(index)}`);
    }
    const byShard = new Map<string, string[]>();
    for (const [tensor, shard] of Object.entries(map as Record<string, unknown>)) {
      const name = checkShardName(shard, tensor, indexPath);
      byShard.set(name, [...(byShard.get(name) ?? []), tensor]);
    }
    const files: SafetensorsFile[] = [];
    const owner = new Map<string, SafetensorsFile>();
    try {
      for (const [shard, tensors] of byShard) {
        const opened = await folder.open(shard);
        if (!opened) throw new CheckpointError(`${indexPath} lists shard ${shard}, which is missing (looked for ${folder.pathOf(shard)})`);
        const f = await SafetensorsFile.fromFile(opened);
        files.push(f);
        for (const t of tensors) {
          if (!f.info(t)) throw new CheckpointError(`${indexPath} places tensor '${t}' in ${shard}, which does not hold it`);
          owner.set(t, f);
        }
      }
    } catch (e) {
      await Promise.all(files.map((f) => f.close()));
      throw e;
    }
    return new SafetensorsShards(indexPath, files, owner);
  }

  /** Every tensor name (the index's weight_map, or the single file's header). */
  names(): string[] {
    return [...this.owner.keys()];
  }

  has(name: string): boolean {
    return this.owner.has(name);
  }

  /** A tensor's dtype, shape and the file that holds it; undefined when absent. */
  info(name: string): (SafeTensorInfo & { file: string }) | undefined {
    const f = this.owner.get(name);
    return f ? { ...f.info(name)!, file: f.path } : undefined;
  }

  /** Reads one tensor's bytes from its file. */
  async read(name: string): Promise<SafeTensorView> {
    const f = this.owner.get(name);
    if (!f) throw new SafetensorsError(`${this.source}: no tensor '${name}'`);
    return f.read(name);
  }

  async close(): Promise<void> {
    await Promise.all(this.files.map((f) => f.close()));
  }
}
