/**
 * A progress line for long work (training steps, tokens, files): count and total (or unknown),
 * rate, ETA and custom fields such as `loss 3.21`.
 *
 * On a terminal it redraws one line in place (`\r`, clipped to the terminal's width, at most
 * every `redrawS`). Into a file or a pipe, where `\r` would pile up, it prints a plain line at
 * most every `intervalS` seconds and a final line from `finish()`. The clock (`now`) and the
 * stream are injectable, so tests drive it without waiting or a terminal.
 *
 * The rate is measured over the last `rateWindowS` seconds (recent speed, not the average since a
 * slow start); the final line reports the average over the whole run.
 */
import { ArgumentError } from '../errors.ts';

/** Where the line goes: anything with `write`; `isTTY` and `columns` as on Node's process.stderr. */
export interface ProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export type ProgressFields = Record<string, string | number>;

export interface ProgressOptions {
  /** Items expected in all; undefined when unknown (no bar, percentage or ETA). */
  total?: number;
  /** Words before the numbers, e.g. 'train'. */
  label?: string;
  /** What is counted, shown after counts and in the rate: 'tok' → '1.2k tok/s'. */
  unit?: string;
  /** Default: process.stderr. */
  stream?: ProgressStream;
  /** Force terminal (redraw) or plain (line) mode; default: the stream's isTTY. */
  tty?: boolean;
  /** Line width on a terminal; default: the stream's columns, else 80. */
  width?: number;
  /** Plain mode: at least this many seconds between lines (default 10). */
  intervalS?: number;
  /** Terminal mode: at least this many seconds between redraws (default 0.1). */
  redrawS?: number;
  /** Seconds over which the rate is measured (default 10). */
  rateWindowS?: number;
  /** Clock in milliseconds; default performance.now. */
  now?: () => number;
  /** Items already done when the bar starts (a resumed run): shown in the count, not in the rate. */
  start?: number;
}

/** 3 significant digits with k/M/G/T/P: 999 → '999', 1234 → '1.23k', 1200 → '1.2k', 45600000 → '45.6M'. */
export function formatCount(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  const units = ['', 'k', 'M', 'G', 'T', 'P'];
  let v = n;
  let i = 0;
  while (Math.abs(v) >= 999.5 && i < units.length - 1) { v /= 1000; i++; }
  return `${Number(v.toPrecision(3))}${units[i]}`;
}

/** Seconds as '42s', '3m05s', '1h02m', '3d04h'. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '?';
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  const two = (x: number) => String(x).padStart(2, '0');
  if (s < 3600) return `${Math.floor(s / 60)}m${two(s % 60)}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${two(Math.floor((s % 3600) / 60))}m`;
  return `${Math.floor(s / 86400)}d${two(Math.floor((s % 86400) / 3600))}h`;
}

function formatField(v: string | number): string {
  if (typeof v === 'string') return v;
  if (Number.isInteger(v) || !Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e6) ? v.toExponential(3) : String(Number(v.toPrecision(4)));
}

function defaultStream(): ProgressStream {
  const p = (globalThis as { process?: { stderr?: ProgressStream } }).process;
  if (!p?.stderr) throw new ArgumentError('Progress: no stream given and no process.stderr here; pass options.stream');
  return p.stderr;
}

const BAR_MIN = 10;
const BAR_MAX = 30;

export class Progress {
  private readonly stream: ProgressStream;
  private readonly tty: boolean;
  private readonly now: () => number;
  private readonly startMs: number;
  private readonly samples: { t: number; n: number }[] = [];
  private current = 0;
  private fields: ProgressFields = {};
  private lastDrawMs = -Infinity;
  private lastLineMs: number;
  private finished = false;
  private drawnWidth = 0;

  constructor(private readonly opts: ProgressOptions = {}) {
    const { total, intervalS, redrawS, rateWindowS } = opts;
    if (total !== undefined && !(Number.isFinite(total) && total >= 0)) throw new ArgumentError(`Progress: total ${total} must be a non-negative number or undefined (unknown)`);
    for (const [k, v] of [['intervalS', intervalS], ['redrawS', redrawS], ['rateWindowS', rateWindowS]] as const) {
      if (v !== undefined && !(Number.isFinite(v) && v >= 0)) throw new ArgumentError(`Progress: ${k} ${v} must be a non-negative number of seconds`);
    }
    this.stream = opts.stream ?? defaultStream();
    this.tty = opts.tty ?? this.stream.isTTY === true;
    this.now = opts.now ?? (() => performance.now());
    this.startMs = this.now();
    this.lastLineMs = this.startMs;
    this.current = opts.start ?? 0;
    this.samples.push({ t: this.startMs, n: this.current });
  }

  /** The count so far. */
  get count(): number { return this.current; }

  /** Adds `n` items (default 1) and merges `fields`. */
  tick(n = 1, fields?: ProgressFields): void {
    this.update(this.current + n, fields);
  }

  /** Sets the count to `current` and merges `fields`; draws when the interval allows. */
  update(current: number, fields?: ProgressFields): void {
    if (this.finished) return;
    if (!Number.isFinite(current)) throw new ArgumentError(`Progress.update: count ${current} must be a finite number`);
    this.current = current;
    if (fields) Object.assign(this.fields, fields);
    const t = this.now();
    this.sample(t);
    if (this.tty) {
      if ((t - this.lastDrawMs) / 1000 >= (this.opts.redrawS ?? 0.1)) this.draw(t);
    } else if ((t - this.lastLineMs) / 1000 >= (this.opts.intervalS ?? 10)) {
      this.lastLineMs = t;
      this.stream.write(`${this.render(t)}\n`);
    }
  }

  /**
   * Prints a message above the progress line (on a terminal: clears the line, prints, redraws),
   * so logs and the bar do not garble each other.
   */
  log(message: string): void {
    if (this.tty && !this.finished && this.drawnWidth > 0) {
      this.stream.write(`\r\x1b[K${message}\n`);
      this.draw(this.now());
    } else {
      this.stream.write(`${message}\n`);
    }
  }

  /** The final line (average rate, elapsed time); later updates are ignored. Idempotent. */
  finish(fields?: ProgressFields): void {
    if (this.finished) return;
    if (fields) Object.assign(this.fields, fields);
    const t = this.now();
    this.finished = true;
    const line = this.render(t);
    this.stream.write(this.tty ? `\r${this.clip(line)}\x1b[K\n` : `${line}\n`);
  }

  /** The line as it would print now (without `\r`); the final form once finished. */
  render(t = this.now()): string {
    const { total, label, unit } = this.opts;
    const u = unit ? ` ${unit}` : '';
    const elapsedS = (t - this.startMs) / 1000;
    const parts: string[] = [];
    const known = total !== undefined;
    if (known) {
      const frac = total === 0 ? 1 : Math.min(1, Math.max(0, this.current / total));
      parts.push(`${(frac * 100).toFixed(0).padStart(3)}%`, `${formatCount(this.current)}/${formatCount(total)}${u}`);
    } else {
      parts.push(`${formatCount(this.current)}${u}`);
    }
    const rate = this.finished ? (elapsedS > 0 ? (this.current - (this.opts.start ?? 0)) / elapsedS : NaN) : this.windowRate(t);
    parts.push(Number.isFinite(rate) ? `${formatCount(rate)}${u}/s` : `?${u}/s`);
    if (this.finished) parts.push(`in ${formatDuration(elapsedS)}`);
    else if (known) {
      const left = total - this.current;
      parts.push(`ETA ${left <= 0 ? '0s' : rate > 0 ? formatDuration(left / rate) : '?'}`);
    } else parts.push(`${formatDuration(elapsedS)}`);
    for (const [k, v] of Object.entries(this.fields)) parts.push(`${k} ${formatField(v)}`);

    const head = label ? `${label} ` : '';
    const text = parts.join('  ');
    if (!this.tty || !known) return head + text;
    // On a terminal a bar takes the room that is left, within [BAR_MIN, BAR_MAX] cells.
    const room = this.width() - 1 - head.length - text.length - 4;
    if (room < BAR_MIN) return head + text;
    const cells = Math.min(BAR_MAX, room);
    const filled = Math.round(cells * (total === 0 ? 1 : Math.min(1, Math.max(0, this.current / total))));
    return `${head}[${'#'.repeat(filled)}${'.'.repeat(cells - filled)}]  ${text}`;
  }

  private width(): number {
    return Math.max(20, this.opts.width ?? this.stream.columns ?? 80);
  }

  private clip(line: string): string {
    const max = this.width() - 1;
    return line.length <= max ? line : `${line.slice(0, max - 1)}…`;
  }

  private draw(t: number): void {
    this.lastDrawMs = t;
    const line = this.clip(this.render(t));
    this.drawnWidth = line.length;
    this.stream.write(`\r${line}\x1b[K`);
  }

  private sample(t: number): void {
    this.samples.push({ t, n: this.current });
    const windowMs = (this.opts.rateWindowS ?? 10) * 1000;
    // Keep the newest sample at least windowMs old as the window's start.
    while (this.samples.length > 2 && t - this.samples[1].t >= windowMs) this.samples.shift();
  }

  private windowRate(t: number): number {
    const first = this.samples[0];
    const dt = (t - first.t) / 1000;
    return dt > 0 ? (this.current - first.n) / dt : NaN;
  }
}
