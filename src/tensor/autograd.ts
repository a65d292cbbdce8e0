/**
 * Reverse-mode autograd over a tape of GradNodes. Each op that sees an input with `requiresGrad`
 * records one node: where each input's gradient goes (a leaf tensor or the input's own node),
 * the tensors it saved, and a backward rule written with other ops. Nodes are reference counted
 * by the tensors they produced and by the nodes downstream, so dropping a graph without calling
 * `backward()` frees what it saved; `backward()` frees it too unless asked to keep the graph.
 */
import { ArgumentError, DTypeError, GradError } from '../errors.ts';
import { isGradEnabled, keep, noGrad, tidy } from './scope.ts';
import { shareStorage, type Tensor } from './tensor.ts';

type GradTarget = { leaf: Tensor } | { node: GradNode } | null;
export type BackwardRule = (grad: Tensor, saved: readonly Tensor[]) => readonly (Tensor | null)[];

export class GradNode {
  private refs = 1;
  released = false;
  constructor(
    readonly op: string,
    readonly targets: readonly GradTarget[],
    private rule: BackwardRule | null,
    private saved: Tensor[],
  ) {
    for (const t of targets) if (t && 'node' in t) t.node.refs++;
  }

  /** Computes input gradients from the output gradient. */
  apply(grad: Tensor): readonly (Tensor | null)[] {
    if (this.released || !this.rule) throw new GradError(`backward through '${this.op}' a second time: its saved tensors were freed; pass { retainGraph: true } to the first backward()`);
    return this.rule(grad, this.saved);
  }

  /** Frees the saved tensors; the node stays in the graph but can't run backward again. */
  free(): void {
    if (this.released) return;
    this.released = true;
    for (const t of this.saved) t.dispose();
    this.saved = [];
    this.rule = null;
  }

  /**
   * One owner let go; the last one frees the node and lets go of its inputs' nodes. Iterative
   * (an explicit stack), so releasing a chain of any length cannot overflow the call stack.
   */
  drop(): void {
    const stack: GradNode[] = [this];
    while (stack.length) {
      const node = stack.pop()!;
      if (--node.refs > 0) continue;
      node.free();
      for (const t of node.targets) if (t && 'node' in t) stack.push(t.node);
    }
  }
}

/**
 * Records `out` as the result of an op on `inputs` when gradients are on and some input needs
 * one. `save` lists tensors the rule reads; they are kept alive (sharing storage) until released.
 */
export function record(op: string, out: Tensor, inputs: readonly Tensor[], rule: BackwardRule, save: readonly Tensor[] = []): Tensor {
  if (!isGradEnabled() || !inputs.some((t) => t.requiresGrad)) return out;
  const targets: GradTarget[] = inputs.map((t) => (!t.requiresGrad ? null : t.node ? { node: t.node } : { leaf: t }));
  const saved = save.map((t) => shareStorage(t, t.shape, false));
  out.node = new GradNode(op, targets, rule, saved);
  out.requiresGrad = true;
  return out;
}

export interface BackwardOptions {
  /** Keep saved tensors so backward can run again through the same graph. */
  retainGraph?: boolean;
}

/**
 * Accumulates d(root)/d(leaf) into every reachable leaf's `.grad`. `grad` defaults to 1 for a
 * scalar root. Gradients accumulate across calls until the caller zeroes them.
 */
export function backward(root: Tensor, grad: Tensor | null, opts: BackwardOptions, ones: (t: Tensor) => Tensor, add: (a: Tensor, b: Tensor) => Tensor): void {
  root.live();
  if (!root.requiresGrad) throw new GradError(`backward: tensor of shape [${root.shape}] does not require grad (no input of its graph has requiresGrad)`);
  if (!grad && root.size !== 1) throw new GradError(`backward: root of shape [${root.shape}] is not a scalar; pass a gradient of the same shape`);
  if (grad && grad.shape.join() !== root.shape.join()) throw new GradError(`backward: gradient shape [${grad.shape}] does not match root shape [${root.shape}]`);
  if (grad && grad.dtype !== root.dtype) throw new DTypeError(`backward: gradient dtype ${grad.dtype} does not match root dtype ${root.dtype}`);
  if (grad && grad.backend !== root.backend) throw new ArgumentError(`backward: gradient lives on backend '${grad.backend.name}', root on '${root.backend.name}'; move one with toBackend()`);
  noGrad(() => tidy(() => {
    const seed = grad ?? ones(root);
    if (!root.node) { accumulateLeaf(root, seed, add); return; }
    const order = topoOrder(root.node);
    const pending = new Map<GradNode, Tensor>([[root.node, seed]]);
    for (const node of order) {
      const g = pending.get(node);
      if (!g) {
        // No gradient reached this node (every path to it returned null): it is done all the same.
        if (!opts.retainGraph) node.free();
        continue;
      }
      pending.delete(node);
      const grads = node.apply(g);
      node.targets.forEach((target, i) => {
        const gi = grads[i];
        if (!target || !gi) return;
        if ('leaf' in target) accumulateLeaf(target.leaf, gi, add);
        else {
          const prev = pending.get(target.node);
          pending.set(target.node, prev ? add(prev, gi) : gi);
        }
      });
      if (!opts.retainGraph) node.free();
    }
  }));
}

function accumulateLeaf(leaf: Tensor, g: Tensor, add: (a: Tensor, b: Tensor) => Tensor): void {
  if (leaf.disposed) return;
  if (g.shape.join() !== leaf.shape.join()) throw new GradError(`internal: gradient of shape [${g.shape}] for a leaf of shape [${leaf.shape}]`);
  if (g.dtype !== leaf.dtype) throw new GradError(`internal: gradient of dtype ${g.dtype} for a leaf of dtype ${leaf.dtype}`);
  // Always a tensor of our own (sharing storage), never the caller's or a rule's tensor object.
  const next = leaf.grad ? add(leaf.grad, g) : shareStorage(g, g.shape);
  if (leaf.grad) leaf.grad.dispose();
  leaf.grad = keep(next);
}

/** Nodes reachable from root, each after every node that feeds it a gradient. */
function topoOrder(root: GradNode): GradNode[] {
  const order: GradNode[] = [];
  const state = new Map<GradNode, number>();
  const stack: [GradNode, number][] = [[root, 0]];
  while (stack.length) {
    const top = stack[stack.length - 1];
    const [node, i] = top;
    if (i === 0) {
      if (state.has(node)) { stack.pop(); continue; }
      state.set(node, 1);
    }
    if (i < node.targets.length) {
      top[1]++;
      const t = node.targets[i];
      if (t && 'node' in t && !state.has(t.node)) stack.push([t.node, 0]);
    } else {
      stack.pop();
      order.push(node);
    }
  }
  return order.reverse();
}
