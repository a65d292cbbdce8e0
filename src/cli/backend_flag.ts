/** The --backend flag: cpu, wasm, webgpu or auto (a hardware GPU if there is one, else wasm); and --dtype, the weights' dtype. */
import type { Backend } from '../backend/backend.ts';
import { BACKEND_CHOICES, initBackend, type BackendName } from '../backend/registry.ts';
import '../backend/wasm/index.ts';
import '../backend/webgpu/index.ts';
import { UsageError } from './args.ts';
import { WEIGHT_DTYPES, type WeightDtypeChoice } from '../io/weight_dtype.ts';


export async function backendFromFlag(command: string, value: string | undefined): Promise<Backend> {
  const name = value ?? 'auto';
  if (!(BACKEND_CHOICES as readonly string[]).includes(name)) throw new UsageError(`${command}: --backend ${JSON.stringify(name)}: expected one of ${BACKEND_CHOICES.join(', ')}`);
  return initBackend(name as BackendName);
}

/** The --dtype flag's usage line: the dtype a loaded model's weights are kept in (io/weight_dtype.ts). */
export const DTYPE_USAGE = `  --dtype D          weights kept in auto (default: a checkpoint's own f16 or bf16 on a GPU with
                     16-bit tensor cores, else f32), f32, f16 or bf16`;

/** The --dtype flag's value (default auto); another is a UsageError naming it. */
export function dtypeFromFlag(command: string, value: string | undefined): WeightDtypeChoice {
  const name = value ?? 'auto';
  if (!(WEIGHT_DTYPES as readonly string[]).includes(name)) throw new UsageError(`${command}: --dtype ${JSON.stringify(name)}: expected one of ${WEIGHT_DTYPES.join(', ')}`);
  return name as WeightDtypeChoice;
}
