/**
 * The safetensors format (Hugging Face), read and written on plain bytes: no Node API, so the
 * browser loads checkpoints with the same code.
 *
 * Layout: 8 bytes N (u64, little-endian) · N bytes of UTF-8 JSON header · the data section. The
 * header maps each tensor name to `{ dtype, shape, data_offsets: [begin, end] }` (offsets into the
 * data section) and may hold `__metadata__`, a map of strings to strings. The tensors' byte
 * ranges must tile the data section exactly: no gap, no overlap, nothing after the last one.
 *
 * The writer follows the reference implementation: tensors ordered by element size (largest
 * first) then by name, so each one starts at a multiple of its element size, and the header
 * padded with spaces to a multiple of 8 bytes, so the data section starts 8-aligned.
 *
 * All multi-byte values are little-endian, as the format says; typed arrays use the host's byte
 * order, so the tensor bridges below refuse to run on a big-endian host.
 */
import { requireF16Range } from './weight_dtype.ts';
import { clip, FonError, showValue, UnsupportedError } from '../errors.ts';
import type { Backend } from '../backend/backend.ts';
import { getBackend } from '../backend/registry.ts';
import { f32ToHost, hostToF32, isFloat, type AnyHostArray, type DType } from '../tensor/dtype.ts';
import { fromHandle, type Tensor } from '../tensor/tensor.ts';
import { parseJson } from './json.ts';

/** A tensor name as messages quote it: cut, since a hostile header may hold a name of any length. */
const shown = (name: string) => clip(name, 120);

/** A file that is not valid safetensors: the message names the file and what is wrong. */
export class SafetensorsError extends FonError {}

/** Dtypes FON reads; the first five map one-to-one onto FON's storage dtypes. */
export type SafeDType = 'F32' | 'F16' | 'BF16' | 'I32' | 'U8' | 'F64' | 'I64' | 'I16' | 'I8' | 'BOOL';

/** Bytes per element of each dtype FON reads. */
export const SAFE_DTYPE_BYTES: Readonly<Record<SafeDType, number>> = {
  F64: 8, I64: 8, F32: 4, I32: 4, F16: 2, BF16: 2, I16: 2, U8: 1, I8: 1, BOOL: 1,
};
const SAFE_DTYPES = Object.keys(SAFE_DTYPE_BYTES) as SafeDType[];

/** One tensor to write: its bytes are the view's bytes, taken as they are. */
export interface SafeTensorInput {
  dtype: SafeDType;
  shape: readonly number[];
  data: ArrayBufferView;
}

/** One tensor read: `data` is a view into the decoded file's bytes (no copy). */
export interface SafeTensorView {
  dtype: SafeDType;
  shape: number[];
  data: Uint8Array;
}

export interface DecodedSafetensors {
  tensors: Record<string, SafeTensorView>;
  /** The header's `__metadata__` map; empty when the file has none. */
  metadata: Record<string, string>;
}

const METADATA_KEY = '__metadata__';
const HEADER_ALIGN = 8;

function isSafeDType(v: unknown): v is SafeDType {
  return typeof v === 'string' && Object.prototype.hasOwnProperty.call(SAFE_DTYPE_BYTES, v);
}

function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

function isDim(d: unknown): d is number {
  return typeof d === 'number' && Number.isSafeInteger(d) && d >= 0;
}

/**
 * Serializes tensors (and optional string metadata) to safetensors bytes. Throws SafetensorsError
 * for a reserved or empty name, an unknown dtype, a bad shape, or data whose byte length is not
 * shape × element size.
 */
export function encodeSafetensors(tensors: Record<string, SafeTensorInput>, metadata?: Record<string, string>): Uint8Array {
  const entries = Object.entries(tensors);
  for (const [name, t] of entries) {
    const where = `encodeSafetensors: tensor '${name}'`;
    if (name === '' || name === METADATA_KEY) throw new SafetensorsError(`encodeSafetensors: tensor name '${name}' is not allowed (empty or the reserved key ${METADATA_KEY})`);
    if (!isSafeDType(t.dtype)) throw new SafetensorsError(`${where}: unknown dtype '${String(t.dtype)}', expected one of ${SAFE_DTYPES.join(', ')}`);
    if (!Array.isArray(t.shape) || !t.shape.every(isDim)) throw new SafetensorsError(`${where}: bad shape ${JSON.stringify(t.shape)}, expected non-negative integers`);
    const want = elementCount(t.shape) * SAFE_DTYPE_BYTES[t.dtype];
    if (t.data.byteLength !== want) throw new SafetensorsError(`${where}: shape [${t.shape.join(', ')}] of ${t.dtype} needs ${want} bytes, data has ${t.data.byteLength}`);
  }
  if (metadata !== undefined) {
    for (const [k, v] of Object.entries(metadata)) {
      if (typeof v !== 'string') throw new SafetensorsError(`encodeSafetensors: metadata '${k}' must be a string, got ${typeof v}`);
    }
  }
  // Largest element first, then by name: every tensor starts at a multiple of its element size.
  entries.sort(([an, a], [bn, b]) => SAFE_DTYPE_BYTES[b.dtype] - SAFE_DTYPE_BYTES[a.dtype] || (an < bn ? -1 : an > bn ? 1 : 0));

  const header: Record<string, unknown> = {};
  if (metadata !== undefined) {
    const meta: Record<string, string> = {};
    for (const [k, v] of Object.entries(metadata)) own(meta, k, v);
    header[METADATA_KEY] = meta;
  }
  let offset = 0;
  for (const [name, t] of entries) {
    own(header, name, { dtype: t.dtype, shape: [...t.shape], data_offsets: [offset, offset + t.data.byteLength] }); // '__proto__' too
    offset += t.data.byteLength;
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  const headerLen = Math.ceil(json.length / HEADER_ALIGN) * HEADER_ALIGN;

  const out = new Uint8Array(8 + headerLen + offset);
  const view = new DataView(out.buffer);
  view.setUint32(0, headerLen, true);
  view.setUint32(4, Math.floor(headerLen / 2 ** 32), true);
  out.set(json, 8);
  out.fill(0x20, 8 + json.length, 8 + headerLen);
  let pos = 8 + headerLen;
  for (const [, t] of entries) {
    out.set(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength), pos);
    pos += t.data.byteLength;
  }
  return out;
}

/** One tensor's header entry: dtype, shape and its byte range [begin, end) in the data section. */
export interface SafeTensorInfo {
  dtype: SafeDType;
  shape: number[];
  begin: number;
  end: number;
}

/** A validated header: tensors in data-section order, the metadata, and where the data section starts. */
export interface SafetensorsHeader {
  tensors: Record<string, SafeTensorInfo>;
  /** The header's `__metadata__` map; empty when the file has none. */
  metadata: Record<string, string>;
  /** Byte offset of the data section in the file: 8 + the header length. */
  dataStart: number;
}

/**
 * The largest header FON reads: 100 MB, the limit of the reference implementation (its
 * MAX_HEADER_SIZE), checked before the header is read (a 540 MB header of NUL bytes was once read
 * whole before it was refused as not UTF-8). Real headers are kilobytes to a few megabytes.
 */
export const MAX_HEADER_BYTES = 100_000_000;

/**
 * The header length from a file's first 8 bytes (`prefix`, at least 8 of them unless the file is
 * shorter), checked against the file's size in bytes and MAX_HEADER_BYTES. SafetensorsError,
 * starting with `source`, for a file too short for the length field or a header length beyond
 * the file or the limit.
 */
export function safetensorsHeaderLength(prefix: Uint8Array, fileSize: number, source = 'safetensors'): number {
  const fail = (what: string): never => { throw new SafetensorsError(`${source}: ${what}`); };
  if (fileSize < 8 || prefix.length < 8) fail(`truncated: ${fileSize} bytes, but a safetensors file starts with an 8-byte header length`);
  const view = new DataView(prefix.buffer, prefix.byteOffset, 8);
  const headerLen = view.getUint32(0, true) + view.getUint32(4, true) * 2 ** 32;
  if (headerLen > fileSize - 8) fail(`header length ${headerLen} exceeds the file (${fileSize - 8} bytes after the 8-byte length field); the file is truncated or not safetensors`);
  if (headerLen > MAX_HEADER_BYTES) fail(`header length ${headerLen} is above the ${MAX_HEADER_BYTES}-byte limit for a safetensors header (expected kilobytes to a few megabytes of JSON); not read`);
  return headerLen;
}

/**
 * Parses and validates a header (`headerBytes`, the N bytes after the length field) against the
 * size of the whole file: a header that is not UTF-8 JSON, an unknown dtype, a bad shape or
 * offsets, a byte size that is not shape × element size, offsets that overlap, leave a gap, reach
 * past the end of the file, or leave bytes after the last tensor are each a SafetensorsError
 * starting with `source`. Shared by `decodeSafetensors` (bytes in memory) and the file reader
 * (io/safetensors_file.ts), which reads tensors on demand.
 */
export function parseSafetensorsHeader(headerBytes: Uint8Array, fileSize: number, source = 'safetensors'): SafetensorsHeader {
  const fail = (what: string): never => { throw new SafetensorsError(`${source}: ${what}`); };
  let text = '';
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(headerBytes);
  } catch {
    fail('header is not valid UTF-8');
  }
  const header: unknown = parseJson(text, (why) => new SafetensorsError(`${source}: header is ${why}: ${JSON.stringify(text.slice(0, 60))}`));
  if (typeof header !== 'object' || header === null || Array.isArray(header)) fail(`header must be a JSON object, got ${Array.isArray(header) ? 'an array' : showValue(header)}`);

  const metadata: Record<string, string> = {};
  const entries: { name: string; info: SafeTensorInfo }[] = [];
  for (const [name, info] of Object.entries(header as Record<string, unknown>)) {
    if (name === METADATA_KEY) {
      if (typeof info !== 'object' || info === null || Array.isArray(info)) fail(`${METADATA_KEY} must be an object of strings, got ${showValue(info)}`);
      for (const [k, v] of Object.entries(info as Record<string, unknown>)) {
        if (typeof v !== 'string') fail(`${METADATA_KEY}['${clip(k, 80)}'] must be a string, got ${showValue(v)}`);
        own(metadata, k, v as string);
      }
      continue;
    }
    const where = `tensor '${shown(name)}'`;
    if (typeof info !== 'object' || info === null) fail(`${where}: expected an object with dtype, shape and data_offsets, got ${showValue(info)}`);
    const { dtype, shape, data_offsets: offsets } = info as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (!isSafeDType(dtype)) fail(`${where}: unknown dtype ${showValue(dtype, 40)}, FON reads ${SAFE_DTYPES.join(', ')}`);
    if (!Array.isArray(shape) || !shape.every(isDim)) fail(`${where}: bad shape ${showValue(shape)}, expected an array of non-negative integers`);
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every(isDim) || offsets[0] > offsets[1]) {
      fail(`${where}: bad data_offsets ${showValue(offsets)}, expected [begin, end] with 0 <= begin <= end`);
    }
    const [begin, end] = offsets as [number, number];
    const d = dtype as SafeDType;
    const s = shape as number[];
    const want = elementCount(s) * SAFE_DTYPE_BYTES[d];
    if (end - begin !== want) fail(`${where}: shape [${clip(s.join(', '), 120)}] of ${d} needs ${want} bytes, but data_offsets [${begin}, ${end}] hold ${end - begin}`);
    entries.push({ name, info: { dtype: d, shape: [...s], begin, end } });
  }

  // The byte ranges must tile the data section: sorted by offset, each starts where the last ended.
  const dataStart = 8 + headerBytes.length;
  const dataLen = fileSize - dataStart;
  entries.sort((a, b) => a.info.begin - b.info.begin || a.info.end - b.info.end);
  let covered = 0;
  let last = '';
  for (const { name, info: { begin, end } } of entries) {
    if (end > dataLen) fail(`tensor '${shown(name)}': data_offsets [${begin}, ${end}] reach past the end of the data section (${dataLen} bytes): the file is truncated or the offsets are wrong`);
    if (begin < covered) fail(`tensors '${shown(last)}' and '${shown(name)}' overlap: '${shown(name)}' begins at byte ${begin}, before ${covered} where '${shown(last)}' ends`);
    if (begin > covered) fail(`data_offsets do not cover the data section: bytes [${covered}, ${begin}) belong to no tensor (before '${shown(name)}')`);
    covered = end;
    last = name;
  }
  if (covered !== dataLen) fail(`data_offsets do not cover the data section: ${dataLen - covered} bytes after the last tensor (data ends at ${covered} of ${dataLen})`);

  const tensors: Record<string, SafeTensorInfo> = {};
  for (const e of entries) own(tensors, e.name, e.info);
  return { tensors, metadata, dataStart };
}

/**
 * Parses safetensors bytes. Every tensor's `data` is a view into `bytes`. `source` (a file name)
 * starts every error message; a SafetensorsError says what is wrong: a file too short for the
 * length field, a header length beyond the file, or anything `parseSafetensorsHeader` refuses.
 */
export function decodeSafetensors(bytes: Uint8Array, source = 'safetensors'): DecodedSafetensors {
  const headerLen = safetensorsHeaderLength(bytes, bytes.length, source);
  const header = parseSafetensorsHeader(bytes.subarray(8, 8 + headerLen), bytes.length, source);
  const tensors: Record<string, SafeTensorView> = {};
  for (const [name, { dtype, shape, begin, end }] of Object.entries(header.tensors)) {
    own(tensors, name, { dtype, shape, data: bytes.subarray(header.dataStart + begin, header.dataStart + end) });
  }
  return { tensors, metadata: header.metadata };
}

/**
 * record[key] = value as an own data property even for "__proto__", which plain assignment would
 * turn into a prototype change (the tensor silently dropped); read such records with Object.hasOwn.
 */
function own<T>(record: Record<string, T>, key: string, value: T): void {
  Object.defineProperty(record, key, { value, enumerable: true, writable: true, configurable: true });
}

// ---- bridges to FON tensors ----

const TO_SAFE: Readonly<Record<DType, SafeDType>> = { f32: 'F32', f16: 'F16', bf16: 'BF16', i32: 'I32', u8: 'U8' };
const FROM_SAFE: Readonly<Partial<Record<SafeDType, DType>>> = { F32: 'f32', F16: 'f16', BF16: 'bf16', I32: 'i32', U8: 'u8' };

const HOST_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function requireLittleEndian(where: string): void {
  if (!HOST_LITTLE_ENDIAN) throw new UnsupportedError(`${where}: safetensors is little-endian and this host is big-endian`);
}

/**
 * Reads FON tensors back to the host and serializes them. Every dtype keeps its exact bits
 * (f16/bf16 travel as their raw 16-bit patterns).
 */
export async function tensorsToSafetensors(ts: Record<string, Tensor>, metadata?: Record<string, string>): Promise<Uint8Array> {
  requireLittleEndian('tensorsToSafetensors');
  const inputs: Record<string, SafeTensorInput> = {};
  for (const [name, t] of Object.entries(ts)) {
    inputs[name] = { dtype: TO_SAFE[t.dtype], shape: t.shape, data: await t.data() };
  }
  return encodeSafetensors(inputs, metadata);
}

export interface SafetensorsToTensorsOptions {
  /** Where the tensors live; default the current backend. */
  backend?: Backend;
  /**
   * Converts every float tensor to this float dtype (say bf16 weights loaded as f32); integer
   * tensors keep their dtype. Without it each tensor keeps its file dtype bit for bit.
   */
  dtype?: DType;
  /** Refuse a float tensor holding NaN or ±Inf (a SafetensorsError naming it); default false. */
  finite?: boolean;
}

/** `bytes` as a typed array of `dtype`: a view when aligned, else a copy. */
function typedView(bytes: Uint8Array, ctor: { new (b: ArrayBuffer, o: number, n: number): AnyHostArray | Float64Array | BigInt64Array | Int16Array | Int8Array; BYTES_PER_ELEMENT: number }) {
  const aligned = bytes.byteOffset % ctor.BYTES_PER_ELEMENT === 0 ? bytes : bytes.slice();
  return new ctor(aligned.buffer as ArrayBuffer, aligned.byteOffset, aligned.byteLength / ctor.BYTES_PER_ELEMENT);
}

/**
 * Host array of a FON dtype from a decoded tensor. FON's own dtypes map bit for bit. The rest
 * widen or narrow: F64 → f32 (rounded), I64 → i32 (an error past ±2^31), I16/I8 → i32, BOOL → u8.
 */
function hostArrayOf(name: string, t: SafeTensorView, source: string): { host: AnyHostArray; dtype: DType } {
  switch (t.dtype) {
    case 'F32': return { host: typedView(t.data, Float32Array) as Float32Array, dtype: 'f32' };
    case 'I32': return { host: typedView(t.data, Int32Array) as Int32Array, dtype: 'i32' };
    case 'F16': case 'BF16': return { host: typedView(t.data, Uint16Array) as Uint16Array, dtype: FROM_SAFE[t.dtype]! };
    case 'U8': case 'BOOL': return { host: t.data, dtype: 'u8' };
    case 'F64': return { host: Float32Array.from(typedView(t.data, Float64Array) as Float64Array), dtype: 'f32' };
    case 'I16': return { host: Int32Array.from(typedView(t.data, Int16Array) as Int16Array), dtype: 'i32' };
    case 'I8': return { host: Int32Array.from(typedView(t.data, Int8Array) as Int8Array), dtype: 'i32' };
    case 'I64': {
      const src = typedView(t.data, BigInt64Array) as BigInt64Array;
      const out = new Int32Array(src.length);
      for (let i = 0; i < src.length; i++) {
        const v = src[i];
        if (v > 2147483647n || v < -2147483648n) throw new SafetensorsError(`${source}: tensor '${shown(name)}': I64 value ${v} at index ${i} does not fit FON's i32`);
        out[i] = Number(v);
      }
      return { host: out, dtype: 'i32' };
    }
  }
}

/**
 * One decoded tensor as a host array of a FON dtype: f32/f16/bf16/i32/u8 keep their bits, the
 * other dtypes convert as `hostArrayOf` says, and `dtype` (a float dtype) converts a float tensor.
 * `name` and `source` name it in errors.
 */
export function safeTensorToHost(name: string, t: SafeTensorView, opts: { dtype?: DType; source?: string; finite?: boolean } = {}): { host: AnyHostArray; dtype: DType } {
  requireLittleEndian('safeTensorToHost');
  if (opts.dtype !== undefined && !isFloat(opts.dtype)) throw new SafetensorsError(`safetensorsToTensors: dtype '${opts.dtype}' converts float tensors and must be f32, f16 or bf16`);
  let { host, dtype } = hostArrayOf(name, t, opts.source ?? 'safetensors');
  if (opts.finite) requireFinite(name, host, dtype, opts.source ?? 'safetensors');
  if (opts.dtype !== undefined && isFloat(dtype) && dtype !== opts.dtype) {
    const from = dtype, values = hostToF32(host, dtype);
    host = f32ToHost(values, opts.dtype);
    dtype = opts.dtype;
    // A finite value past f16's range would become an infinity: refused by name instead.
    if (dtype === 'f16') requireF16Range(host as Uint16Array, values, name, opts.source ?? 'safetensors', from);
  }
  return { host, dtype };
}

/**
 * NaN or ±Inf in a float tensor (checked on the stored bits: an all-ones exponent) is a
 * SafetensorsError naming the tensor, how many values and the first; a checkpoint that holds them
 * would load and fail later, far from the cause ("Sampler: logits[0] is NaN").
 */
function requireFinite(name: string, host: AnyHostArray, dtype: DType, source: string): void {
  if (!isFloat(dtype)) return;
  let count = 0, first = -1;
  if (dtype === 'f32') {
    const f = host as Float32Array;
    for (let i = 0; i < f.length; i++) if (!Number.isFinite(f[i])) { count++; if (first < 0) first = i; }
  } else {
    const bits = host as Uint16Array, mask = dtype === 'f16' ? 0x7c00 : 0x7f80;
    for (let i = 0; i < bits.length; i++) if ((bits[i] & mask) === mask) { count++; if (first < 0) first = i; }
  }
  if (count > 0) {
    const v = hostToF32(host.subarray(first, first + 1) as AnyHostArray, dtype)[0];
    throw new SafetensorsError(`${source}: tensor '${shown(name)}' holds ${count} non-finite value${count === 1 ? '' : 's'} of ${host.length} (the first, at index ${first}, is ${v}); pass allowNonFinite (--allow-non-finite) to load it anyway`);
  }
}

/**
 * FON tensors from decoded safetensors: f32/f16/bf16/i32/u8 keep their bits; the other dtypes
 * convert as `hostArrayOf` says; `opts.dtype` converts float tensors (see its comment).
 */
export function safetensorsToTensors(decoded: DecodedSafetensors, opts: SafetensorsToTensorsOptions & { source?: string } = {}): Record<string, Tensor> {
  requireLittleEndian('safetensorsToTensors');
  if (opts.dtype !== undefined && !isFloat(opts.dtype)) throw new SafetensorsError(`safetensorsToTensors: dtype '${opts.dtype}' converts float tensors and must be f32, f16 or bf16`);
  const b = opts.backend ?? getBackend();
  const out: Record<string, Tensor> = {};
  try {
    for (const [name, t] of Object.entries(decoded.tensors)) {
      const { host, dtype } = safeTensorToHost(name, t, { dtype: opts.dtype, source: opts.source, finite: opts.finite });
      out[name] = fromHandle(b, b.upload(host, dtype), t.shape, dtype);
    }
  } catch (e) {
    for (const x of Object.values(out)) x.dispose();
    throw e;
  }
  return out;
}
