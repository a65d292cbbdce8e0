/** Shape arithmetic shared by the ops and every backend (one definition each). */

/** Number of elements of a shape (1 for a scalar []). */
export function sizeOf(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Whether two shapes are equal axis by axis (a shape test on every op call: no strings built). */
export function sameShape(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Row-major strides of `shape` as read through broadcasting into `outShape` (0 on broadcast axes). */
export function broadcastStrides(shape: readonly number[], outShape: readonly number[]): number[] {
  const strides = new Array<number>(outShape.length).fill(0);
  let s = 1;
  for (let i = shape.length - 1, j = outShape.length - 1; i >= 0; i--, j--) {
    strides[j] = shape[i] === 1 ? 0 : s;
    s *= shape[i];
  }
  return strides;
}
