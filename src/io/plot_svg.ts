/**
 * Line plots as self-contained SVG text (loss curves, speed against sequence length): axes with
 * round tick values, light grid lines, one polyline per series, a legend, and every piece of text
 * escaped. Pure string building, no dependency, so the CLI and the browser page share it.
 *
 * Points that cannot be drawn are left out of their series rather than failing the whole plot
 * (a NaN loss from a diverged step, 0 on a log axis); a series left with no point is an error.
 */
import { ArgumentError } from '../errors.ts';

export interface PlotSeries {
  name: string;
  /** [x, y] pairs, drawn in the order given. */
  points: readonly (readonly [number, number])[];
}

export interface LinePlotOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  series: readonly PlotSeries[];
  logX?: boolean;
  logY?: boolean;
  /** A dot at every point, not only on single-point series (sweeps of a few measured sizes). */
  markers?: boolean;
  /** Pixels; default 640 × 400. */
  width?: number;
  height?: number;
}

/** Ten colours that stay apart from one another on white (the common "category10" hues). */
const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];

const MARGIN = { left: 72, right: 24, top: 44, bottom: 56 };
const FONT = 12;

/** Text for SVG content and attribute values: the five XML special characters escaped. */
export function escapeXml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!)
    // Control characters other than tab and newline are not allowed in XML 1.0 at all.
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, '');
}

/** An axis: the drawn domain (in plot units: log10 on a log axis) and its tick values. */
interface Axis {
  lo: number;
  hi: number;
  ticks: number[];
  log: boolean;
}

/** 1, 2 or 5 × 10^k: the round step nearest to `raw`, not below it. */
function niceStep(raw: number): number {
  const p = 10 ** Math.floor(Math.log10(raw));
  const f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

/** Linear axis: bounds widened to round values, about `target` ticks. */
function linearAxis(min: number, max: number, target = 6): Axis {
  if (min === max) {
    const pad = min === 0 ? 1 : Math.abs(min) * 0.1;
    min -= pad;
    max += pad;
  }
  const step = niceStep((max - min) / (target - 1));
  const lo = Math.floor(min / step) * step;
  const hi = Math.ceil(max / step) * step;
  const ticks: number[] = [];
  // Round away binary noise (0.30000000000000004) so labels print cleanly.
  for (let i = 0; lo + i * step <= hi + step * 1e-9; i++) ticks.push(Number((lo + i * step).toPrecision(12)));
  return { lo, hi, ticks, log: false };
}

/** Log axis over whole decades; 2 and 5 between decades when the plot spans few of them. */
function logAxis(min: number, max: number): Axis {
  const lo = Math.floor(Math.log10(min));
  let hi = Math.ceil(Math.log10(max));
  if (lo === hi) hi += 1;
  const decades = hi - lo;
  const every = Math.ceil(decades / 8); // at most ~8 decade labels
  const ticks: number[] = [];
  for (let e = lo; e <= hi; e++) {
    if ((e - lo) % every === 0) ticks.push(10 ** e);
    if (decades <= 2 && e < hi) ticks.push(2 * 10 ** e, 5 * 10 ** e);
  }
  return { lo, hi, ticks: ticks.map((t) => Number(t.toPrecision(12))), log: true };
}

/** A tick label: SI suffix for large values, exponent for tiny ones, else plain digits. */
export function formatTick(v: number): string {
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e4) {
    const units = ['', 'k', 'M', 'G', 'T', 'P', 'E'];
    const k = Math.min(units.length - 1, Math.floor(Math.log10(a) / 3));
    return `${Number((v / 10 ** (3 * k)).toPrecision(4))}${units[k]}`;
  }
  if (a < 1e-3) return Number(v.toPrecision(4)).toExponential();
  return String(Number(v.toPrecision(6)));
}

const r2 = (v: number) => String(Math.round(v * 100) / 100);

/** An SVG line plot of `series`; see the file comment for what it draws and leaves out. */
export function linePlot(opts: LinePlotOptions): string {
  const { title, xLabel, yLabel, series, logX = false, logY = false } = opts;
  const width = opts.width ?? 640;
  const height = opts.height ?? 400;
  if (!(width >= 200 && height >= 150)) throw new ArgumentError(`linePlot: size ${width}×${height} is too small, expected at least 200×150`);
  if (series.length === 0) throw new ArgumentError(`linePlot '${title}': no series to plot`);

  const usable = (x: number, y: number) => Number.isFinite(x) && Number.isFinite(y) && (!logX || x > 0) && (!logY || y > 0);
  const kept = series.map((s) => {
    const pts = s.points.filter(([x, y]) => usable(x, y));
    if (pts.length === 0) {
      const why = s.points.length === 0 ? 'has no points' : `has no point that can be drawn (${s.points.length} given: non-finite${logX || logY ? ' or not > 0 on a log axis' : ''})`;
      throw new ArgumentError(`linePlot '${title}': series '${s.name}' ${why}`);
    }
    return { name: s.name, pts };
  });

  let [xMin, xMax, yMin, yMax] = [Infinity, -Infinity, Infinity, -Infinity];
  for (const { pts } of kept) {
    for (const [x, y] of pts) {
      xMin = Math.min(xMin, x); xMax = Math.max(xMax, x);
      yMin = Math.min(yMin, y); yMax = Math.max(yMax, y);
    }
  }
  const xAxis = logX ? logAxis(xMin, xMax) : linearAxis(xMin, xMax);
  const yAxis = logY ? logAxis(yMin, yMax) : linearAxis(yMin, yMax);

  const px0 = MARGIN.left, px1 = width - MARGIN.right;
  const py0 = height - MARGIN.bottom, py1 = MARGIN.top;
  const unit = (a: Axis, v: number) => ((a.log ? Math.log10(v) : v) - a.lo) / (a.hi - a.lo);
  const sx = (v: number) => px0 + unit(xAxis, v) * (px1 - px0);
  const sy = (v: number) => py0 + unit(yAxis, v) * (py1 - py0);

  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="${FONT}">`);
  out.push(`<title>${escapeXml(title)}</title>`);
  out.push(`<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(`<text x="${r2(width / 2)}" y="${r2(MARGIN.top / 2 + 4)}" text-anchor="middle" font-size="${FONT + 3}" font-weight="bold">${escapeXml(title)}</text>`);

  // Grid and ticks.
  out.push('<g class="grid" stroke="#e5e5e5" stroke-width="1">');
  for (const t of xAxis.ticks) out.push(`<line x1="${r2(sx(t))}" y1="${r2(py0)}" x2="${r2(sx(t))}" y2="${r2(py1)}"/>`);
  for (const t of yAxis.ticks) out.push(`<line x1="${r2(px0)}" y1="${r2(sy(t))}" x2="${r2(px1)}" y2="${r2(sy(t))}"/>`);
  out.push('</g>');
  out.push('<g class="x-ticks" text-anchor="middle">');
  for (const t of xAxis.ticks) out.push(`<text x="${r2(sx(t))}" y="${r2(py0 + FONT + 6)}">${escapeXml(formatTick(t))}</text>`);
  out.push('</g>');
  out.push('<g class="y-ticks" text-anchor="end">');
  for (const t of yAxis.ticks) out.push(`<text x="${r2(px0 - 6)}" y="${r2(sy(t) + FONT / 3)}">${escapeXml(formatTick(t))}</text>`);
  out.push('</g>');
  out.push(`<rect class="frame" x="${r2(px0)}" y="${r2(py1)}" width="${r2(px1 - px0)}" height="${r2(py0 - py1)}" fill="none" stroke="#333333"/>`);
  out.push(`<text class="x-label" x="${r2((px0 + px1) / 2)}" y="${r2(height - 14)}" text-anchor="middle">${escapeXml(xLabel)}${logX ? ' (log)' : ''}</text>`);
  const yMid = r2((py0 + py1) / 2);
  out.push(`<text class="y-label" x="16" y="${yMid}" text-anchor="middle" transform="rotate(-90 16 ${yMid})">${escapeXml(yLabel)}${logY ? ' (log)' : ''}</text>`);

  // Series.
  kept.forEach(({ name, pts }, i) => {
    const color = PALETTE[i % PALETTE.length];
    const coords = pts.map(([x, y]) => `${r2(sx(x))},${r2(sy(y))}`).join(' ');
    out.push(`<polyline class="series" data-name="${escapeXml(name)}" fill="none" stroke="${color}" stroke-width="1.75" stroke-linejoin="round" points="${coords}"/>`);
    if (pts.length === 1 || opts.markers) for (const [x, y] of pts) out.push(`<circle cx="${r2(sx(x))}" cy="${r2(sy(y))}" r="3" fill="${color}"/>`);
  });

  // Legend in the inside corner that covers the least of the lines, on a white box so lines under it
  // stay readable (top right wins ties).
  const rowH = FONT + 6;
  const longest = Math.max(...kept.map((s) => s.name.length));
  const boxW = Math.min(px1 - px0 - 8, 36 + longest * FONT * 0.6);
  const boxH = kept.length * rowH + 8;
  // Points along every segment, so a long straight stretch counts too.
  const screen: number[][] = [];
  for (const { pts } of kept) {
    const xy = pts.map(([x, y]) => [sx(x), sy(y)]);
    xy.forEach(([x, y], j) => {
      screen.push([x, y]);
      if (j === 0) return;
      const [x0, y0] = xy[j - 1];
      for (let k = 1; k < 16; k++) screen.push([x0 + ((x - x0) * k) / 16, y0 + ((y - y0) * k) / 16]);
    });
  }
  const corners = [[px1 - boxW - 8, py1 + 8], [px0 + 8, py1 + 8], [px1 - boxW - 8, py0 - boxH - 8], [px0 + 8, py0 - boxH - 8]];
  const covered = corners.map(([cx, cy]) => screen.filter(([x, y]) => x >= cx - 4 && x <= cx + boxW + 4 && y >= cy - 4 && y <= cy + boxH + 4).length);
  const [boxX, boxY] = corners[covered.indexOf(Math.min(...covered))];
  out.push('<g class="legend">');
  out.push(`<rect x="${r2(boxX)}" y="${r2(boxY)}" width="${r2(boxW)}" height="${r2(boxH)}" fill="#ffffff" fill-opacity="0.85" stroke="#cccccc"/>`);
  kept.forEach(({ name }, i) => {
    const y = boxY + 4 + rowH * i + rowH / 2;
    const color = PALETTE[i % PALETTE.length];
    out.push(`<line x1="${r2(boxX + 6)}" y1="${r2(y)}" x2="${r2(boxX + 26)}" y2="${r2(y)}" stroke="${color}" stroke-width="2"/>`);
    out.push(`<text x="${r2(boxX + 32)}" y="${r2(y + FONT / 3)}">${escapeXml(name)}</text>`);
  });
  out.push('</g>');
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
