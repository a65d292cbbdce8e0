/**
 * A tiny WebAssembly binary writer (in the spirit of jax-js's wasmblr): the wasm backend emits
 * its kernels straight from TypeScript, so there is no build step and no committed binary.
 *
 * It covers what the kernels use: one imported memory, functions over i32/f32/v128 locals,
 * structured control flow with label objects (no hand-counted branch depths), scalar and SIMD
 * loads/stores and arithmetic, and relaxed-SIMD fused multiply-add where the engine has it.
 * Encoding follows the WebAssembly core spec, section 5 (binary format).
 */

export type ValType = 'i32' | 'f32' | 'v128';
const VALTYPE_CODE: Record<ValType, number> = { i32: 0x7f, f32: 0x7d, v128: 0x7b };

/** Unsigned LEB128. */
function uleb(out: number[], value: number): void {
  let v = value >>> 0;
  do {
    let byte = v & 0x7f;
    v >>>= 7;
    if (v !== 0) byte |= 0x80;
    out.push(byte);
  } while (v !== 0);
}

/** Signed LEB128 of a 32-bit integer. */
function sleb(out: number[], value: number): void {
  let v = value | 0;
  for (;;) {
    const byte = v & 0x7f;
    v >>= 7;
    const done = (v === 0 && (byte & 0x40) === 0) || (v === -1 && (byte & 0x40) !== 0);
    out.push(done ? byte : byte | 0x80);
    if (done) return;
  }
}

function name(out: number[], s: string): void {
  const bytes = new TextEncoder().encode(s);
  uleb(out, bytes.length);
  for (const b of bytes) out.push(b);
}

function section(out: number[], id: number, body: number[]): void {
  out.push(id);
  uleb(out, body.length);
  for (const b of body) out.push(b);
}

/** A branch target handed to the body of `block`/`loop`; `br(label)` finds its depth. */
export interface Label { readonly kind: 'block' | 'loop' }

/** The body of one function: a stack-machine instruction stream plus its declared locals. */
export class FunctionBuilder {
  readonly code: number[] = [];
  /** Indices of the parameters, in order (locals declared later follow them). */
  readonly params: number[];
  readonly localTypes: ValType[] = [];
  private labels: Label[] = [];

  constructor(
    readonly index: number,
    readonly name: string,
    readonly paramTypes: readonly ValType[],
    readonly resultTypes: readonly ValType[],
    readonly exported: boolean,
  ) {
    this.params = paramTypes.map((_, i) => i);
  }

  /** Declares a new local and returns its index. */
  local(type: ValType): number {
    this.localTypes.push(type);
    return this.paramTypes.length + this.localTypes.length - 1;
  }

  private op(...bytes: number[]): this {
    for (const b of bytes) this.code.push(b);
    return this;
  }
  private memarg(alignLog2: number, offset: number): this {
    uleb(this.code, alignLog2);
    uleb(this.code, offset);
    return this;
  }
  private simd(opcode: number): this {
    this.code.push(0xfd);
    uleb(this.code, opcode);
    return this;
  }

  // Control flow. Bodies get their label; blocks take and give no values.
  block(body: (l: Label) => void): this { return this.structured(0x02, 'block', body); }
  loop(body: (l: Label) => void): this { return this.structured(0x03, 'loop', body); }
  private structured(opcode: number, kind: Label['kind'], body: (l: Label) => void): this {
    const label: Label = { kind };
    this.op(opcode, 0x40);
    this.labels.push(label);
    body(label);
    this.labels.pop();
    return this.op(0x0b);
  }
  /** Pops an i32 condition; runs `then` when non-zero, else `otherwise`. */
  if(then: () => void, otherwise?: () => void): this {
    this.op(0x04, 0x40);
    this.labels.push({ kind: 'block' });
    then();
    if (otherwise) { this.op(0x05); otherwise(); }
    this.labels.pop();
    return this.op(0x0b);
  }
  private depth(l: Label): number {
    const i = this.labels.lastIndexOf(l);
    if (i < 0) throw new Error(`wasm builder: branch to a label outside its block in ${this.name}`);
    return this.labels.length - 1 - i;
  }
  /**
   * `for (i = from; i < to; i += step) body()` with unsigned compares; `from` pushes the start
   * value, `to` is a local. The body may not branch out of the loop.
   */
  forUp(i: number, from: () => void, to: number, step: number, body: () => void): this {
    from();
    this.set(i);
    return this.block((exit) => {
      this.get(i).get(to).i32GeU().brIf(exit);
      this.loop((top) => {
        body();
        this.get(i).i32Const(step).i32Add().tee(i).get(to).i32LtU().brIf(top);
      });
    });
  }
  br(l: Label): this { this.op(0x0c); uleb(this.code, this.depth(l)); return this; }
  brIf(l: Label): this { this.op(0x0d); uleb(this.code, this.depth(l)); return this; }
  return(): this { return this.op(0x0f); }
  call(f: FunctionBuilder): this { this.op(0x10); uleb(this.code, f.index); return this; }
  drop(): this { return this.op(0x1a); }
  /** Pops (a, b, cond) and pushes a when cond ≠ 0, else b. */
  select(): this { return this.op(0x1b); }

  // Locals.
  get(i: number): this { this.op(0x20); uleb(this.code, i); return this; }
  set(i: number): this { this.op(0x21); uleb(this.code, i); return this; }
  tee(i: number): this { this.op(0x22); uleb(this.code, i); return this; }

  // Memory (addresses are byte offsets; `offset` is the static immediate).
  i32Load(offset = 0): this { return this.op(0x28).memarg(2, offset); }
  f32Load(offset = 0): this { return this.op(0x2a).memarg(2, offset); }
  i32Store(offset = 0): this { return this.op(0x36).memarg(2, offset); }
  f32Store(offset = 0): this { return this.op(0x38).memarg(2, offset); }
  i32Load16u(offset = 0): this { return this.op(0x2f).memarg(1, offset); }
  i32Store16(offset = 0): this { return this.op(0x3b).memarg(1, offset); }
  /** Pops (dest, value, length) and fills bytes (bulk memory). */
  memoryFill(): this { return this.op(0xfc, 0x0b, 0x00); }

  // i32.
  i32Const(v: number): this { this.op(0x41); sleb(this.code, v); return this; }
  i32Eqz(): this { return this.op(0x45); }
  i32Eq(): this { return this.op(0x46); }
  i32Ne(): this { return this.op(0x47); }
  i32LtU(): this { return this.op(0x49); }
  i32GtU(): this { return this.op(0x4b); }
  i32LeU(): this { return this.op(0x4d); }
  i32GeU(): this { return this.op(0x4f); }
  i32Add(): this { return this.op(0x6a); }
  i32Sub(): this { return this.op(0x6b); }
  i32Mul(): this { return this.op(0x6c); }
  i32DivU(): this { return this.op(0x6e); }
  i32RemU(): this { return this.op(0x70); }
  i32And(): this { return this.op(0x71); }
  i32Or(): this { return this.op(0x72); }
  i32Shl(): this { return this.op(0x74); }
  i32ShrU(): this { return this.op(0x76); }

  // f32.
  f32Const(v: number): this {
    const bytes = new Uint8Array(new Float32Array([v]).buffer);
    return this.op(0x43, ...bytes);
  }
  f32Add(): this { return this.op(0x92); }
  f32Sub(): this { return this.op(0x93); }
  f32Mul(): this { return this.op(0x94); }
  f32Div(): this { return this.op(0x95); }
  f32Max(): this { return this.op(0x97); }

  // SIMD (opcodes from the fixed-width SIMD proposal, now in the core spec).
  v128Load(offset = 0): this { return this.simd(0x00).memarg(4, offset); }
  v128Load32Splat(offset = 0): this { return this.simd(0x09).memarg(2, offset); }
  v128Store(offset = 0): this { return this.simd(0x0b).memarg(4, offset); }
  v128Zero(): this { this.simd(0x0c); for (let i = 0; i < 16; i++) this.code.push(0); return this; }
  f32x4Splat(): this { return this.simd(0x13); }
  f32x4Add(): this { return this.simd(0xe4); }
  f32x4Sub(): this { return this.simd(0xe5); }
  f32x4Mul(): this { return this.simd(0xe6); }
  /** Relaxed SIMD: pops (a, b, c), pushes a·b + c, fused or not as the hardware prefers. */
  f32x4RelaxedMadd(): this { return this.simd(0x105); }
  f32x4Div(): this { return this.simd(0xe7); }
  /** IEEE min/max: NaN if either lane is NaN. */
  f32x4Min(): this { return this.simd(0xe8); }
  f32x4Max(): this { return this.simd(0xe9); }
  /** Pseudo-max, no NaN rule: pmax(a, b) = a < b ? b : a. */
  f32x4Pmax(): this { return this.simd(0xeb); }
  /** Pseudo-min, no NaN rule: pmin(a, b) = b < a ? b : a. */
  f32x4Pmin(): this { return this.simd(0xea); }
  f32x4Neg(): this { return this.simd(0xe1); }
  f32x4Abs(): this { return this.simd(0xe0); }
  f32x4Sqrt(): this { return this.simd(0xe3); }
  f32x4Nearest(): this { return this.simd(0x6a); }
  /** Lane comparisons give all-ones / all-zeros masks. */
  f32x4Eq(): this { return this.simd(0x41); }
  f32x4Ne(): this { return this.simd(0x42); }
  f32x4Lt(): this { return this.simd(0x43); }
  f32x4Gt(): this { return this.simd(0x44); }
  f32x4Le(): this { return this.simd(0x45); }
  f32x4Ge(): this { return this.simd(0x46); }
  f32x4ExtractLane(lane: number): this { return this.simd(0x1f).op(lane); }
  /** Pushes the constant f32x4 with every lane `v`. */
  f32x4Const(v: number): this {
    this.simd(0x0c);
    const bytes = new Uint8Array(new Float32Array([v, v, v, v]).buffer);
    for (const b of bytes) this.code.push(b);
    return this;
  }
  /** Pops (a, b); lane i of the result is lane lanes[i] of a‖b (0–3 from a, 4–7 from b). */
  f32x4Shuffle(lanes: readonly [number, number, number, number]): this {
    this.simd(0x0d);
    for (const lane of lanes) for (let byte = 0; byte < 4; byte++) this.code.push(lane * 4 + byte);
    return this;
  }
  v128And(): this { return this.simd(0x4e); }
  /** a & ~b. */
  v128AndNot(): this { return this.simd(0x4f); }
  v128Or(): this { return this.simd(0x50); }
  /** Pops (a, b, mask): bits of a where mask is 1, of b elsewhere. */
  v128Bitselect(): this { return this.simd(0x52); }
  i32x4Splat(): this { return this.simd(0x11); }
  i32x4Add(): this { return this.simd(0xae); }
  i32x4Shl(): this { return this.simd(0xab); }
  i32x4ShrS(): this { return this.simd(0xac); }
  i32x4Sub(): this { return this.simd(0xb1); }
  i32x4TruncSatF32x4S(): this { return this.simd(0xf8); }

  /** The encoded body (locals declaration + instructions + end). */
  encode(): number[] {
    const out: number[] = [];
    // Run-length groups of equal consecutive local types.
    const groups: [number, ValType][] = [];
    for (const t of this.localTypes) {
      const last = groups[groups.length - 1];
      if (last && last[1] === t) last[0]++;
      else groups.push([1, t]);
    }
    uleb(out, groups.length);
    for (const [count, t] of groups) { uleb(out, count); out.push(VALTYPE_CODE[t]); }
    for (const b of this.code) out.push(b);
    out.push(0x0b);
    return out;
  }
}

export interface MemoryImport {
  module: string; name: string;
  /** In 64 KiB pages. */
  initialPages: number; maximumPages: number;
  /** Shared memory (for worker threads) needs SharedArrayBuffer and a maximum. */
  shared: boolean;
}

/** Collects functions and writes the module: types, imported memory, functions, exports, code. */
export class WasmModuleBuilder {
  private functions: FunctionBuilder[] = [];

  constructor(private memory: MemoryImport) {}

  function(name: string, params: readonly ValType[], results: readonly ValType[] = [], exported = true): FunctionBuilder {
    const f = new FunctionBuilder(this.functions.length, name, params, results, exported);
    this.functions.push(f);
    return f;
  }

  build(): Uint8Array<ArrayBuffer> {
    const out = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
    // Types: one per distinct signature.
    const typeKeys: string[] = [];
    const typeOf = this.functions.map((f) => {
      const key = `${f.paramTypes.join(',')}->${f.resultTypes.join(',')}`;
      let i = typeKeys.indexOf(key);
      if (i < 0) { i = typeKeys.length; typeKeys.push(key); }
      return i;
    });
    const types: number[] = [];
    uleb(types, typeKeys.length);
    for (const key of typeKeys) {
      const [ps, rs] = key.split('->').map((s) => (s ? (s.split(',') as ValType[]) : []));
      types.push(0x60);
      uleb(types, ps.length); for (const p of ps) types.push(VALTYPE_CODE[p]);
      uleb(types, rs.length); for (const r of rs) types.push(VALTYPE_CODE[r]);
    }
    section(out, 1, types);

    const imports: number[] = [];
    uleb(imports, 1);
    name(imports, this.memory.module);
    name(imports, this.memory.name);
    imports.push(0x02, this.memory.shared ? 0x03 : 0x01);
    uleb(imports, this.memory.initialPages);
    uleb(imports, this.memory.maximumPages);
    section(out, 2, imports);

    const funcs: number[] = [];
    uleb(funcs, this.functions.length);
    for (const t of typeOf) uleb(funcs, t);
    section(out, 3, funcs);

    const exported = this.functions.filter((f) => f.exported);
    const exports: number[] = [];
    uleb(exports, exported.length);
    for (const f of exported) { name(exports, f.name); exports.push(0x00); uleb(exports, f.index); }
    section(out, 7, exports);

    const code: number[] = [];
    uleb(code, this.functions.length);
    for (const f of this.functions) {
      const body = f.encode();
      uleb(code, body.length);
      for (const b of body) code.push(b);
    }
    section(out, 10, code);
    return new Uint8Array(out);
  }
}
