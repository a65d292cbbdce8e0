/**
 * Explicit parity skips per backend: key (a case name, an op name, or a case-name prefix such as
 * 'sort/f16') → the reason. A backend's test passes its entry to runParity, and
 * test/parity/table.ts uses the same entry, so docs/ops.md shows every skip with its reason.
 * runParity counts each skipped case, and assertParity fails on a key that no longer matches any case.
 */
export const BACKEND_SKIPS: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  cpu: {},
  wasm: {},
  webgpu: {},
};

export function skipsFor(backend: string): Readonly<Record<string, string>> {
  return BACKEND_SKIPS[backend] ?? {};
}
