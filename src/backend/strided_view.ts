/**
 * The bounds of a strided view (StridedArgs), checked before a backend reads or writes through it:
 * a view reaching past its tensor would read or write memory that is not the tensor's (on a GPU
 * without robustness checks, another buffer's), so copyStrided and assignStrided refuse it on every
 * backend rather than leave the result to the device.
 */
import { ShapeError } from '../errors.ts';
import type { StridedArgs } from './backend.ts';

/** The lowest and highest element index the view touches (null for an empty view). */
export function viewSpan(args: StridedArgs): { lo: number; hi: number } | null {
  if (args.outShape.some((d) => d === 0)) return null;
  let lo = args.offset, hi = args.offset;
  args.outShape.forEach((d, i) => {
    const reach = (d - 1) * args.strides[i];
    if (reach < 0) lo += reach;
    else hi += reach;
  });
  return { lo, hi };
}

/** Throws ShapeError unless op's view lies within a tensor of `elements` (and, for assign, src holds at least one value per view element). */
export function checkStridedView(op: string, elements: number, args: StridedArgs, srcElements?: number): void {
  const view = () => `the view (shape [${args.outShape.join(', ')}], strides [${args.strides.join(', ')}], offset ${args.offset})`;
  if (args.strides.length !== args.outShape.length) throw new ShapeError(`${op}: ${view()} has ${args.strides.length} strides for ${args.outShape.length} axes`);
  const span = viewSpan(args);
  if (span && (span.lo < 0 || span.hi >= elements)) throw new ShapeError(`${op}: ${view()} reaches elements ${span.lo} … ${span.hi} of a tensor of ${elements}; ${elements > 0 ? `expected 0 … ${elements - 1}` : 'the tensor has no elements'}`);
  const m = args.outShape.reduce((a, b) => a * b, 1);
  if (srcElements !== undefined && srcElements < m) throw new ShapeError(`${op}: ${view()} takes ${m} values; src holds ${srcElements}`);
}
