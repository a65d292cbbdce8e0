/**
 * The FoX "Pro" data-dependent token shift on keys and values (specs/fpa_depth.md §1.2 [V]),
 * applied to the raw k and v projections, before the block's QK-norm and RoPE:
 *
 *   k̃_t = α_t k_{t−1} + (1 − α_t) k_t,      α_t = σ(W_α x_t)      (one α per KV head)
 *
 * and the same for v with its own W_α. The spec has one α per head (Linear(D, H), no bias); k and
 * v have Hkv heads here, so this is its GQA variant: one α per KV head, W_α (Hkv × C), no bias, the
 * same as the spec's when nKvHeads = nHeads. Parameters under the block's name:
 * `shift_k.weight`, `shift_v.weight`, initialised normal(0, 0.02) like every other projection (the
 * FoX code's init), so α ≈ 0.5 at step 0 with a small dependence on the input.
 *
 * The first position shifts with zeros (k_{−1} = 0, as the spec's repo does), so position 0 of a
 * sequence gives (1 − α_0) k_0. Shapes: k, v (B, T, Hkv, D), x (B, T, C), α (B, T, Hkv, 1).
 *
 * Cache: the side state "shift" (TokenShiftState), the pre-shift k and v rows of the last
 * RECENT_ROWS positions of each sequence in a ring, f32 (B, Hkv, RECENT_ROWS, D) each, position p
 * at row p mod RECENT_ROWS: a step at position pos > 0 shifts its first row with the row of pos − 1,
 * then stores its own rows. A cached step continues where the last one ended, restarts at 0, or
 * follows a truncation of the cache to a length L whose row L − 1 the ring still holds (draft–revise
 * decoding rewinds by at most its draft length, far below RECENT_ROWS); anything else is an
 * ArgumentError.
 */
import { ArgumentError } from '../../errors.ts';
import { kvWrite } from '../../ops/attention.ts';
import { cast } from '../../ops/cast.ts';
import { zeros } from '../../ops/creation.ts';
import { add, mul, sigmoid, sub } from '../../ops/elementwise.ts';
import { concat, narrow, permute, reshape } from '../../ops/layout.ts';
import { Linear } from '../../nn/linear.ts';
import { Module } from '../../nn/module.ts';
import type { ParamFactory } from '../../nn/params.ts';
import { keep } from '../../tensor/scope.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { toF32 } from './gates.ts';
import type { CacheLayout, CacheSideState, LayerKv, ModelDims } from '../mechanism.ts';
import { boolOption } from '../options.ts';

/** Pre-shift rows kept per sequence: how far back a truncation may rewind the token shift. */
export const RECENT_ROWS = 16;

/** The token shift's cache side state: rings of the last RECENT_ROWS pre-shift k and v rows (see the file comment). */
export class TokenShiftState implements CacheSideState {
  readonly k: Tensor;
  readonly v: Tensor;
  /** The next position a step may start at (positions < next have their rows in the ring, the last RECENT_ROWS of them). */
  next = 0;
  /** A truncate to length L needs row L − 1 in the ring: at most RECENT_ROWS − 1 positions back. */
  readonly maxRewind = RECENT_ROWS - 1;

  constructor(slot: LayerKv) {
    const [b, h, , d] = slot.k.shape;
    const o = { backend: slot.k.backend };
    this.k = keep(zeros([b, h, RECENT_ROWS, d], o));
    this.v = keep(zeros([b, h, RECENT_ROWS, d], o));
  }

  truncate(length: number): void {
    if (length > this.next) throw new ArgumentError(`token shift: cannot truncate to ${length} positions: only ${this.next} were written`);
    if (length > 0 && length - 1 < this.next - RECENT_ROWS) {
      throw new ArgumentError(`token shift: cannot truncate to ${length} positions: the cache keeps the pre-shift rows of the last ${RECENT_ROWS} positions (${this.next - RECENT_ROWS} … ${this.next - 1}) and position ${length - 1} is not among them`);
    }
    this.next = length;
  }

  async settle(): Promise<void> {}

  get bytes(): number { return (this.k.size + this.v.size) * 4; }

  dispose(): void {
    this.k.dispose();
    this.v.dispose();
  }
}

/** The 'tokenShift' option of fox and fpa entries, kept in the parsed entry only when on (so entries without it read as before). */
export const tokenShiftOption = (o: Record<string, unknown>, at: string): { tokenShift?: true } => (boolOption(o, 'tokenShift', at) ? { tokenShift: true } : {});

/** The token shift's side state, for a layout of a layer with `tokenShift`. */
export const tokenShiftSide = (on: boolean | undefined): CacheLayout['side'] => (on ? { shift: (slot) => new TokenShiftState(slot) } : {});

export class TokenShift extends Module {
  readonly shiftK: Linear;
  readonly shiftV: Linear;

  /** `name` is the attention block's prefix (e.g. "layers.3.attn"); `mechanism` names the layer in errors. */
  constructor(f: ParamFactory, name: string, dims: ModelDims, private readonly mechanism: string) {
    super();
    this.shiftK = this.child(new Linear(f, `${name}.shift_k`, dims.dModel, dims.nKvHeads));
    this.shiftV = this.child(new Linear(f, `${name}.shift_v`, dims.dModel, dims.nKvHeads));
  }

  /** k, v (B, T, Hkv, D) at positions 0 … T−1 of their sequences, x (B, T, C) → shifted k, v. Differentiable. */
  forward(k: Tensor, v: Tensor, x: Tensor): [Tensor, Tensor] {
    return [shift(k, this.alpha(this.shiftK, x), zeroRow(k)), shift(v, this.alpha(this.shiftV, x), zeroRow(v))];
  }

  /**
   * k, v (B, n, Hkv, D) at positions pos … pos+n−1: shifted with the rows the cache holds from
   * position pos − 1 (zeros at pos = 0); their own pre-shift rows go into the ring.
   */
  forwardCached(k: Tensor, v: Tensor, x: Tensor, cache: LayerKv, pos: number): [Tensor, Tensor] {
    const st = cache.side?.shift;
    if (!(st instanceof TokenShiftState)) throw new ArgumentError(`${this.mechanism}: the KV cache slot has no token-shift state; make the cache with KvCache from this model's config`);
    if (pos > 0 && st.next !== pos) {
      throw new ArgumentError(`${this.mechanism}: token shift at position ${pos} needs the pre-shift k and v of position ${pos - 1}, but the cache ${st.next === 0 ? 'holds none' : `holds those up to position ${st.next - 1}`}; a cached step must continue where the last one ended (truncate the cache to rewind), or restart at position 0`);
    }
    const kPrev = pos === 0 ? zeroRow(k) : ringRow(st.k, pos - 1, k);
    const vPrev = pos === 0 ? zeroRow(v) : ringRow(st.v, pos - 1, v);
    const out: [Tensor, Tensor] = [shift(k, this.alpha(this.shiftK, x), kPrev), shift(v, this.alpha(this.shiftV, x), vPrev)];
    // Computed before the ring is overwritten: kPrev may be a view of it.
    const n = k.shape[1];
    writeRing(st.k, k, pos);
    writeRing(st.v, v, pos);
    st.next = pos + n;
    return out;
  }

  /** α (B, T, Hkv, 1) from x (B, T, C). */
  private alpha(lin: Linear, x: Tensor): Tensor {
    const [b, t] = x.shape;
    return reshape(sigmoid(lin.forward(x)), [b, t, lin.outFeatures, 1]);
  }
}

/**
 * y (B, T, Hkv, D) shifted by α (B, T, Hkv, 1): α_t y_{t−1} + (1 − α_t) y_t, where y_{−1} is
 * `first` (B, 1, Hkv, D), the row before this call's first position.
 */
export function shift(y: Tensor, alpha: Tensor, first: Tensor): Tensor {
  const t = y.shape[1];
  const prev = t === 1 ? first : concat([first, narrow(y, 1, 0, t - 1)], 1); // (B, T, Hkv, D): rows −1 … T−2
  return add(mul(alpha, prev), mul(sub(1, alpha), y));
}

/** A zero row (B, 1, Hkv, D) like y's. */
const zeroRow = (y: Tensor): Tensor => zeros([y.shape[0], 1, y.shape[2], y.shape[3]], { backend: y.backend, dtype: y.dtype });

/** Position p's row of a ring (B, Hkv, R, D) f32 as (B, 1, Hkv, D) in y's dtype. */
function ringRow(ring: Tensor, p: number, y: Tensor): Tensor {
  const [b, h, , d] = ring.shape;
  const row = reshape(narrow(ring, 2, p % RECENT_ROWS, 1), [b, 1, h, d]); // (B, Hkv, 1, D): the unit axis moves
  return y.dtype === 'f32' ? row : cast(row, y.dtype);
}

/** Rows of y (B, n, Hkv, D) at positions pos … pos+n−1 into the ring (B, Hkv, R, D) f32 at rows p mod R: the last R of them, in at most two writes. */
function writeRing(ring: Tensor, y: Tensor, pos: number): void {
  const n = y.shape[1], m = Math.min(n, RECENT_ROWS), first = pos + n - m;
  const rows = toF32(narrow(y, 1, n - m, m)); // (B, m, Hkv, D): positions first … pos+n−1
  const byHead = permute(rows, [0, 2, 1, 3]); // (B, m, Hkv, D) → (B, Hkv, m, D)
  const at = first % RECENT_ROWS, part = Math.min(m, RECENT_ROWS - at);
  kvWrite(ring, part === m ? byHead : narrow(byHead, 2, 0, part), at);
  if (part < m) kvWrite(ring, narrow(byHead, 2, part, m - part), 0);
}
