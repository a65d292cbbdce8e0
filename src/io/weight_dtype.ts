/**
 * The dtype a loaded model's weights are kept in (LoadModelOptions.dtype, the CLI's --dtype):
 *
 *   auto  the checkpoint's own 16-bit dtype (f16 or bf16) on a backend whose fastest precision is
 *         16-bit (WebGPU with f16 tensor cores: half the memory and the tensor-core kernels), f32
 *         everywhere else (the CPU backends and GPUs without them compute in f32, so 16-bit
 *         storage would only add conversions) and for checkpoints stored in f32;
 *   f32, f16, bf16  that dtype, where the backend offers it.
 *
 * The stored dtype of a checkpoint is that of most of its weight bytes (a bf16 model with an f32
 * norm or two is a bf16 model). Weights stored in another dtype are converted while they are read;
 * a value past f16's range (±65504) is an error naming the tensor, not a silent infinity.
 */
import type { Backend } from '../backend/backend.ts';
import { ArgumentError, DTypeError, UnsupportedError } from '../errors.ts';
import type { FloatDType } from '../tensor/dtype.ts';

export type WeightDtypeChoice = 'auto' | FloatDType;
export const WEIGHT_DTYPES: readonly WeightDtypeChoice[] = ['auto', 'f32', 'f16', 'bf16'];

/** `choice` checked (an ArgumentError naming it otherwise): what a caller passed as a weight dtype. */
export function parseWeightDtype(choice: unknown, what = 'dtype'): WeightDtypeChoice {
  if (typeof choice === 'string' && (WEIGHT_DTYPES as readonly string[]).includes(choice)) return choice as WeightDtypeChoice;
  throw new ArgumentError(`${what} ${JSON.stringify(choice)}: expected one of ${WEIGHT_DTYPES.join(', ')}`);
}

/**
 * The stored dtype of safetensors tensors (their headers' dtype and shape): the FON dtype of most
 * bytes (F16 → f16, BF16 → bf16, F32 and F64 → f32; f32 when there are none).
 */
export function storedDtype(tensors: Iterable<{ dtype: string; shape: readonly number[] }>): FloatDType {
  const bytes = new Map<FloatDType, number>();
  for (const t of tensors) {
    const d: FloatDType = t.dtype === 'F16' ? 'f16' : t.dtype === 'BF16' ? 'bf16' : 'f32';
    bytes.set(d, (bytes.get(d) ?? 0) + t.shape.reduce((n, x) => n * x, 1) * (d === 'f32' ? 4 : 2));
  }
  let best: FloatDType = 'f32', most = -1;
  for (const [d, n] of bytes) if (n > most) { best = d; most = n; }
  return best;
}

/** The dtype to keep weights stored in `stored` on `backend`, for `choice` (the rule above). */
export function weightDtype(choice: WeightDtypeChoice, stored: FloatDType, backend: Backend): FloatDType {
  const support = backend.precisions();
  if (choice === 'auto') return stored !== 'f32' && support.fastest !== 'f32' ? stored : 'f32';
  if (!support.offered.includes(choice)) {
    throw new UnsupportedError(`load: dtype ${choice} is not offered by the ${backend.name} backend${support.missing ? ` (${support.missing})` : ''}; it offers ${support.offered.join(', ')}`);
  }
  return choice;
}

/**
 * Checks that the f16 `bits` converted from `values` (stored as `from`) turned no finite value into
 * an infinity (f16's range is ±65504): a DTypeError naming the tensor, the value and the way out.
 */
export function requireF16Range(bits: Uint16Array, values: Float32Array, name: string, source: string, from: FloatDType): void {
  for (let i = 0; i < bits.length; i++) {
    if ((bits[i] & 0x7c00) === 0x7c00 && Number.isFinite(values[i])) {
      throw new DTypeError(`${source}: tensor '${name}' holds ${values[i]} at element ${i}, past f16's range (±65504); load it in f32${from === 'bf16' ? ' or bf16' : ''} (dtype f32${from === 'bf16' ? ' or bf16' : ''})`);
    }
  }
}
