// A small SVG chart over time (no library): lines with points, or bars per day, with a legend.
// Each point has a <title>, so hovering (or a screen reader) gives its value.
import { h, svg } from './ui.js';

const W = 640;
const H = 220;
const BASE_PAD = { left: 48, right: 12, top: 12, bottom: 28 };
const AXIS_CHAR = 7.2; // an axis label's character width at its font size, in viewBox units (with room)

function niceMax(value) {
  if (!(value > 0)) return 1;
  const pow = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (value <= step * pow) return step * pow;
  return 10 * pow;
}

// series: [{name, cls, points: [{t: Date|string, y: number, label?: string}]}]
export function timeChart({ series, kind = 'line', yMax = null, yFormat = (v) => String(v), title = 'chart' }) {
  const all = series.flatMap((s) => s.points.map((p) => ({ ...p, t: new Date(p.t).getTime() })));
  if (!all.length) return h('p', { class: 'empty', text: 'No data to chart yet.' });
  let t0 = Math.min(...all.map((p) => p.t));
  let t1 = Math.max(...all.map((p) => p.t));
  // One point: a window around it (a day each side for bars, which are days).
  if (t0 === t1) { const pad = kind === 'bar' ? 86_400_000 : 3_600_000; t0 -= pad; t1 += pad; }
  else if (kind === 'bar') { t0 -= 43_200_000; t1 += 43_200_000; } // half a day: the end bars fit
  const top = yMax ?? niceMax(Math.max(...all.map((p) => p.y)));
  // The left margin fits the longest y label ("$0.0125", "12,500"): a fixed one clipped them.
  const yLabels = [0, 1, 2, 3, 4].map((i) => yFormat((top * i) / 4));
  const PAD = { ...BASE_PAD, left: Math.max(BASE_PAD.left, 10 + AXIS_CHAR * Math.max(...yLabels.map((l) => String(l).length))) };
  const x = (t) => PAD.left + ((t - t0) / (t1 - t0)) * (W - PAD.left - PAD.right);
  const y = (v) => H - PAD.bottom - (Math.min(v, top) / top) * (H - PAD.top - PAD.bottom);
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: `chart chart-${kind}`, role: 'img', 'aria-label': title });
  for (let i = 0; i <= 4; i += 1) {
    const v = (top * i) / 4;
    root.append(svg('line', { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v), class: 'grid' }),
      svg('text', { x: PAD.left - 6, y: y(v) + 4, class: 'axis', 'text-anchor': 'end' }, yLabels[i]));
  }
  const day = (t) => new Date(t).toLocaleDateString(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' });
  if (kind === 'bar') {
    // Bars are days: each is labelled under itself with the (UTC) day it sums, at most ~10 labels.
    const days = [...new Set(all.map((p) => p.t))].sort((a, b) => a - b);
    const every = Math.ceil(days.length / 10);
    days.forEach((t, i) => {
      if (i % every === 0) root.append(svg('text', { x: x(t), y: H - 8, class: 'axis day', 'text-anchor': 'middle' }, day(t)));
    });
  } else {
    const fmt = (t) => new Date(t).toLocaleDateString(undefined, { month: 'short', day: 'numeric' })
      + (t1 - t0 < 2 * 86_400_000 ? ` ${new Date(t).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' })}` : '');
    root.append(svg('text', { x: PAD.left, y: H - 8, class: 'axis' }, fmt(t0)),
      svg('text', { x: W - PAD.right, y: H - 8, class: 'axis', 'text-anchor': 'end' }, fmt(t1)));
  }
  const slot = Math.max(4, ((W - PAD.left - PAD.right) / Math.max(1, new Set(all.map((p) => p.t)).size)) * 0.7);
  series.forEach((s, index) => {
    const pts = s.points.map((p) => ({ ...p, t: new Date(p.t).getTime() })).sort((a, b) => a.t - b.t);
    if (kind === 'line' && pts.length > 1) {
      root.append(svg('polyline', { points: pts.map((p) => `${x(p.t)},${y(p.y)}`).join(' '), class: `line ${s.cls || `s${index}`}` }));
    }
    for (const p of pts) {
      const tip = svg('title', {}, p.label || `${s.name}: ${yFormat(p.y)} at ${new Date(p.t).toLocaleString()}`);
      if (kind === 'bar') {
        const width = Math.min(28, slot / series.length);
        const left = x(p.t) - (width * series.length) / 2 + width * index;
        root.append(svg('rect', { x: left, y: y(p.y), width, height: H - PAD.bottom - y(p.y), class: `bar ${s.cls || `s${index}`}` }, tip));
      } else {
        root.append(svg('circle', { cx: x(p.t), cy: y(p.y), r: pts.length > 20 ? 2.5 : 4, class: `point ${s.cls || `s${index}`}` }, tip));
      }
    }
  });
  const legend = h('div', { class: 'legend' }, series.map((s, index) => h('span', { class: `key ${s.cls || `s${index}`}` }, s.name)));
  return h('figure', { class: 'chart-box' }, root, legend);
}
