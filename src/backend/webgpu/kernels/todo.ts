/** Temporary: a kernel not yet written for WebGPU throws UnsupportedError naming the op. */
import { UnsupportedError } from '../../../errors.ts';

export const todo = (op: string) => (): never => {
  throw new UnsupportedError(`webgpu: op '${op}' is not implemented on the webgpu backend yet`);
};
