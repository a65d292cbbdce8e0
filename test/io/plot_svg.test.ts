/** SVG line plots: well-formed XML, round ticks, log axes, escaping, points mapped inside the frame, errors. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ArgumentError } from '../../src/errors.ts';
import { escapeXml, formatTick, linePlot } from '../../src/io/plot_svg.ts';

interface Element { name: string; attrs: Record<string, string>; children: Element[]; text: string }

/**
 * A strict little XML parser for what linePlot emits: balanced tags, quoted attributes without
 * raw '<' or '&', only the five predefined entities and numeric references. Throws on any
 * violation; returns the root element.
 */
function parseXml(src: string): Element {
  const checkText = (t: string, where: string) => {
    const bad = /&(?!(amp|lt|gt|quot|apos|#\d+|#x[0-9a-f]+);)/i.exec(t);
    if (bad) throw new Error(`bare '&' in ${where}: ${JSON.stringify(t.slice(bad.index, bad.index + 12))}`);
    if (t.includes('>') && where === 'attribute') throw new Error('raw > in attribute');
    return t.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&apos;/g, "'").replace(/&amp;/g, '&');
  };
  const root: Element = { name: '#root', attrs: {}, children: [], text: '' };
  const stack: Element[] = [root];
  let i = 0;
  while (i < src.length) {
    const lt = src.indexOf('<', i);
    const text = src.slice(i, lt === -1 ? src.length : lt);
    stack[stack.length - 1].text += checkText(text, 'text');
    if (lt === -1) break;
    const gt = src.indexOf('>', lt);
    if (gt === -1) throw new Error(`unclosed tag at ${lt}`);
    const tag = src.slice(lt + 1, gt);
    if (tag.startsWith('/')) {
      const open = stack.pop()!;
      if (open.name !== tag.slice(1)) throw new Error(`</${tag.slice(1)}> closes <${open.name}>`);
    } else {
      const selfClose = tag.endsWith('/');
      const body = selfClose ? tag.slice(0, -1) : tag;
      const m = /^([a-zA-Z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*$/.exec(body);
      if (!m) throw new Error(`malformed tag <${tag}>`);
      const attrs: Record<string, string> = {};
      for (const a of m[2].matchAll(/([\w:-]+)="([^"]*)"/g)) {
        if (a[1] in attrs) throw new Error(`duplicate attribute ${a[1]}`);
        attrs[a[1]] = checkText(a[2], 'attribute');
      }
      const el: Element = { name: m[1], attrs, children: [], text: '' };
      stack[stack.length - 1].children.push(el);
      if (!selfClose) stack.push(el);
    }
    i = gt + 1;
  }
  if (stack.length !== 1) throw new Error(`unclosed <${stack[stack.length - 1].name}>`);
  if (root.children.length !== 1) throw new Error(`${root.children.length} root elements`);
  return root.children[0];
}

function all(el: Element, pred: (e: Element) => boolean, out: Element[] = []): Element[] {
  if (pred(el)) out.push(el);
  for (const c of el.children) all(c, pred, out);
  return out;
}
const group = (svg: Element, cls: string) => all(svg, (e) => e.attrs.class === cls)[0];
const tickLabels = (svg: Element, cls: string) => group(svg, cls).children.map((c) => c.text);

const loss = {
  title: 'loss', xLabel: 'step', yLabel: 'cross-entropy',
  series: [
    { name: 'train', points: [[0, 4.1], [50, 3.2], [100, 2.65]] as [number, number][] },
    { name: 'val', points: [[0, 4.2], [100, 2.9]] as [number, number][] },
  ],
};

test('the parser used here rejects what it should (so the checks below can fail)', () => {
  assert.throws(() => parseXml('<a><b></a>'), /closes/);
  assert.throws(() => parseXml('<a x="1 & 2"/>'), /bare '&'/);
  assert.throws(() => parseXml('<a>x < y</a>'), /malformed tag/);
  assert.throws(() => parseXml('<a x=1/>'), /malformed tag/);
  assert.equal(parseXml('<a t="&lt;&amp;"><b/>q &amp; r</a>').text, 'q & r');
});

test('a loss plot is one well-formed svg with title, axis labels, one polyline per series and a legend', () => {
  const svg = parseXml(linePlot(loss));
  assert.equal(svg.name, 'svg');
  assert.equal(svg.attrs.xmlns, 'http://www.w3.org/2000/svg');
  assert.equal(svg.attrs.viewBox, '0 0 640 400');
  const lines = all(svg, (e) => e.name === 'polyline');
  assert.deepEqual(lines.map((l) => l.attrs['data-name']), ['train', 'val']);
  assert.equal(lines[0].attrs.points.split(' ').length, 3);
  assert.notEqual(lines[0].attrs.stroke, lines[1].attrs.stroke);
  assert.deepEqual(group(svg, 'legend').children.filter((c) => c.name === 'text').map((c) => c.text), ['train', 'val']);
  assert.equal(group(svg, 'x-label').text, 'step');
  assert.equal(group(svg, 'y-label').text, 'cross-entropy');
  assert.deepEqual(tickLabels(svg, 'x-ticks'), ['0', '20', '40', '60', '80', '100']);
  assert.deepEqual(tickLabels(svg, 'y-ticks'), ['2.5', '3', '3.5', '4', '4.5']);
});

test('points land inside the frame, in order, at the right place on the axes', () => {
  const svg = parseXml(linePlot(loss));
  const frame = group(svg, 'frame').attrs;
  const [fx, fy, fw, fh] = [frame.x, frame.y, frame.width, frame.height].map(Number);
  const pts = all(svg, (e) => e.name === 'polyline')[0].attrs.points.split(' ').map((p) => p.split(',').map(Number));
  for (const [x, y] of pts) assert.ok(x >= fx && x <= fx + fw && y >= fy && y <= fy + fh, `${x},${y} outside the frame`);
  // x = 0 and 100 are the ends of the x axis [0, 100]; y = 2.65 on the axis [2.5, 4.5] (SVG y grows downward).
  assert.equal(pts[0][0], fx);
  assert.equal(pts[2][0], fx + fw);
  assert.ok(Math.abs(pts[2][1] - (fy + fh - ((2.65 - 2.5) / 2) * fh)) < 0.01);
  assert.ok(pts[0][1] < pts[1][1] && pts[1][1] < pts[2][1], 'falling loss is drawn going down the page');
});

test('log axes: decade ticks, and 2 and 5 between decades when the span is short', () => {
  const speed = linePlot({
    title: 'decode speed', xLabel: 'sequence length', yLabel: 'ms', logX: true, logY: true,
    series: [{ name: 'fon', points: [[128, 0.5], [1024, 2], [131072, 40], [1048576, 300]] }],
  });
  const svg = parseXml(speed);
  assert.deepEqual(tickLabels(svg, 'x-ticks'), ['100', '1000', '10k', '100k', '1M', '10M']);
  assert.deepEqual(tickLabels(svg, 'y-ticks'), ['0.1', '1', '10', '100', '1000']);
  assert.equal(group(svg, 'x-label').text, 'sequence length (log)');
  // Equal ratios are equal distances on a log axis.
  const xs = tickLabels(svg, 'x-ticks').map((_, i) => Number(group(svg, 'x-ticks').children[i].attrs.x));
  const gaps = xs.slice(1).map((x, i) => x - xs[i]);
  for (const g of gaps) assert.ok(Math.abs(g - gaps[0]) < 0.02, `uneven decades ${gaps}`);

  const short = parseXml(linePlot({ title: 't', xLabel: 'x', yLabel: 'y', logY: true, series: [{ name: 's', points: [[0, 3], [1, 30]] }] }));
  assert.deepEqual(tickLabels(short, 'y-ticks'), ['1', '2', '5', '10', '20', '50', '100']);
});

test('text is escaped everywhere it appears', () => {
  const nasty = 'a<b & "c" \'d\' >e';
  const out = linePlot({ title: nasty, xLabel: nasty, yLabel: nasty, series: [{ name: nasty, points: [[1, 1], [2, 2]] }] });
  assert.ok(!out.includes('a<b'), 'no raw < from the text');
  assert.ok(out.includes('a&lt;b &amp; &quot;c&quot; &#39;d&#39; &gt;e'));
  const svg = parseXml(out);
  assert.equal(all(svg, (e) => e.name === 'title')[0].text, nasty);
  assert.equal(all(svg, (e) => e.name === 'polyline')[0].attrs['data-name'], nasty);
  assert.equal(escapeXml('x\u0001y'), 'xy', 'control characters (not allowed in XML) are dropped');
});

test('non-finite points and non-positive values on a log axis are left out, not drawn', () => {
  const svg = parseXml(linePlot({ title: 't', xLabel: 'x', yLabel: 'y', logY: true, series: [{ name: 's', points: [[0, 2], [1, NaN], [2, 0], [3, 1]] }] }));
  assert.equal(all(svg, (e) => e.name === 'polyline')[0].attrs.points.split(' ').length, 2);
});

test('a single point gets a marker; a flat series still gets a usable axis', () => {
  const svg = parseXml(linePlot({ title: 't', xLabel: 'x', yLabel: 'y', series: [{ name: 'one', points: [[5, 3]] }] }));
  assert.equal(all(svg, (e) => e.name === 'circle').length, 1);
  const ys = tickLabels(svg, 'y-ticks').map(Number);
  assert.ok(ys[0] < 3 && ys[ys.length - 1] > 3, `${ys}`);
});

test('markers: a dot at every drawn point of every series', () => {
  const series = [{ name: 'a', points: [[1, 1], [2, 4], [3, 9]] as [number, number][] }, { name: 'b', points: [[1, 2], [2, NaN], [3, 3]] as [number, number][] }];
  assert.equal(all(parseXml(linePlot({ title: 't', xLabel: 'x', yLabel: 'y', series })), (e) => e.name === 'circle').length, 0);
  assert.equal(all(parseXml(linePlot({ title: 't', xLabel: 'x', yLabel: 'y', series, markers: true })), (e) => e.name === 'circle').length, 5);
});

test('empty input is an ArgumentError naming the plot and the series', () => {
  const base = { title: 'loss', xLabel: 'x', yLabel: 'y' };
  assert.throws(() => linePlot({ ...base, series: [] }), (e: unknown) => e instanceof ArgumentError && e.message === "linePlot 'loss': no series to plot");
  assert.throws(() => linePlot({ ...base, series: [{ name: 'val', points: [] }] }), /linePlot 'loss': series 'val' has no points/);
  assert.throws(() => linePlot({ ...base, logX: true, series: [{ name: 'v', points: [[0, 1], [-1, 2]] }] }), /series 'v' has no point that can be drawn \(2 given: non-finite or not > 0 on a log axis\)/);
  assert.throws(() => linePlot({ ...base, width: 10, series: [{ name: 'v', points: [[0, 1]] }] }), /size 10×400 is too small/);
});

test('tick labels: SI suffixes, exponents for tiny values, no binary noise', () => {
  assert.deepEqual([0, 0.1 + 0.2, 1500, 20000, 2.5e6, 3e-4, -0.5].map(formatTick), ['0', '0.3', '1500', '20k', '2.5M', '3e-4', '-0.5']);
});

test('the legend moves to a corner the lines leave free', () => {
  const legendX = (pts: [number, number][]) => {
    const svg = parseXml(linePlot({ title: 't', xLabel: 'x', yLabel: 'y', series: [{ name: 'rising', points: pts }] }));
    const box = group(svg, 'legend').children[0].attrs;
    return Number(box.x) < 320 ? 'left' : 'right';
  };
  assert.equal(legendX([[0, 10], [100, 0]]), 'right', 'a falling line leaves the top right free');
  assert.equal(legendX([[0, 0], [100, 10]]), 'left', 'a rising line runs through the top right');
});
