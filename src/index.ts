/** FON's public API: tensors, ops, autograd and backends. */
export { FonError, ShapeError, DTypeError, UnsupportedError, DisposedError, ArgumentError, DeviceError, GradError } from './errors.ts';
export type { DType, FloatDType } from './tensor/dtype.ts';
export { Tensor } from './tensor/tensor.ts';
export { tidy, keep, noGrad, isGradEnabled } from './tensor/scope.ts';
export type { Backend } from './backend/backend.ts';
export { initBackend, setBackend, getBackend, destroyBackends, shutdownBackends, registerBackendFactory, type BackendName } from './backend/registry.ts';
export * from './ops/creation.ts';
export { manualSeed } from './ops/random.ts';
export * from './ops/elementwise.ts';
export * from './ops/reduce.ts';
export * from './ops/layout.ts';
export * from './ops/matmul.ts';
export * from './ops/indexing.ts';
export * from './ops/fused.ts';
export * from './ops/scan_sort.ts';
export * from './ops/cast.ts';
export * from './ops/grad.ts';
export { toBackend } from './ops/transfer.ts';
