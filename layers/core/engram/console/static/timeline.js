// A run's timeline (OB3), from GET /api/runs/{runId}/trace: each span a bar on the run's time axis,
// nested under its parent; hovering or focusing a span shows its numbers (duration, tokens, cost),
// and opening it shows its attributes, a tool call also its input and result from the run's
// toolCalls. Attribute names are OpenTelemetry's GenAI conventions (gen_ai.*) and Engram's (engram.*).
import { get, id } from './api.js';
import { h, svg, clear, errorBox, fmtNum, fmtCost, fmtMs, pretty, stylesheet } from './ui.js';

await stylesheet('insight.css');

const A = {
  op: 'gen_ai.operation.name', model: 'gen_ai.request.model', responseModel: 'gen_ai.response.model',
  input: 'gen_ai.usage.input_tokens', output: 'gen_ai.usage.output_tokens',
  cacheRead: 'gen_ai.usage.cache_read.input_tokens', cacheWrite: 'gen_ai.usage.cache_creation.input_tokens',
  finish: 'gen_ai.response.finish_reasons', firstChunk: 'gen_ai.response.time_to_first_chunk',
  tool: 'gen_ai.tool.name', callId: 'gen_ai.tool.call.id', cost: 'engram.usage.cost_usd',
  connection: 'engram.tool.connection', bytes: 'engram.tool.bytes', outcome: 'engram.tool.outcome', error: 'error.type',
};
const MAX_DEPTH = 6;
const TICKS = 4;

const has = (attrs, key) => attrs[key] !== undefined && attrs[key] !== null;

// The numbers a span's tooltip gives, in words.
function numbers(span) {
  const a = span.attributes || {};
  const out = [span.name, `${fmtMs(span.durationMs)}`, `from ${fmtMs(span.startMs)}`];
  if (has(a, A.model) || has(a, A.responseModel)) out.push(a[A.responseModel] || a[A.model]);
  if (has(a, A.input) || has(a, A.output)) out.push(`${fmtNum(a[A.input] || 0)} in · ${fmtNum(a[A.output] || 0)} out tokens`);
  if (a[A.cacheRead] || a[A.cacheWrite]) out.push(`cache ${fmtNum(a[A.cacheRead] || 0)} read / ${fmtNum(a[A.cacheWrite] || 0)} written`);
  if (has(a, A.cost)) out.push(fmtCost(a[A.cost]));
  if (has(a, A.firstChunk)) out.push(`first token after ${fmtMs(Number(a[A.firstChunk]) * 1000)}`);
  if (has(a, A.finish)) out.push(`stop: ${[].concat(a[A.finish]).join(', ')}`);
  if (has(a, A.connection)) out.push(`on ${a[A.connection]}`);
  if (has(a, A.bytes)) out.push(`${fmtNum(a[A.bytes])} bytes`);
  if (span.status === 'error' || has(a, A.error)) out.push(`failed: ${a[A.error] || 'error'}`);
  if (span.open) out.push('still open when recorded');
  return out;
}

// The run's tool call a span is about (by its tool_use id).
function callOf(span, calls) {
  const callId = (span.attributes || {})[A.callId];
  return callId ? calls.find((c) => c.toolUseId === callId) : null;
}

function detailOf(span, call) {
  const attrs = Object.entries(span.attributes || {});
  return h('div', { class: 'span-detail' },
    call ? [h('div', { class: 'label', text: 'Input' }), h('pre', { class: 'span-input', text: pretty(call.input ?? {}) }),
      h('div', { class: 'label', text: 'Result' }), h('pre', { class: 'span-result', text: pretty(call.result ?? '') }),
      call.decision ? h('p', { class: 'muted', text: `Approval: ${call.decision}${call.decidedBy ? ` by ${call.decidedBy}` : ''}${call.decidedAt ? ` at ${call.decidedAt}` : ''}` }) : null] : null,
    attrs.length ? h('dl', { class: 'facts span-attributes' }, attrs.map(([k, v]) => [h('dt', { text: k }), h('dd', { text: typeof v === 'object' ? JSON.stringify(v) : String(v) })])) : null);
}

function axis(total) {
  const root = svg('svg', { class: 'timeline-axis', 'aria-hidden': 'true', height: 18, width: '100%' });
  for (let i = 0; i <= TICKS; i += 1) {
    const anchor = i === 0 ? 'start' : i === TICKS ? 'end' : 'middle';
    root.append(svg('text', { x: `${(i / TICKS) * 100}%`, y: 13, 'text-anchor': anchor, class: 'axis' }, fmtMs((total * i) / TICKS)));
  }
  return root;
}

let seq = 0;

// A row: the span's name (indented by depth) as a button that opens its detail, its bar, and the
// tooltip its button describes.
function row(span, total, calls) {
  const n = (seq += 1);
  const tipId = `span-tip-${n}`;
  const detailId = `span-detail-${n}`;
  const start = Math.max(0, Number(span.startMs) || 0);
  const width = Math.max(0, (Number(span.endMs) || start) - start);
  const x = total ? (start / total) * 1000 : 0;
  const w = total ? Math.max(2, (width / total) * 1000) : 1000;
  const kind = String(span.kind || 'span').replace(/[^a-z]/gi, '-');
  const call = callOf(span, calls);
  const button = h('button', { type: 'button', class: 'span-name', 'aria-expanded': 'false', 'aria-controls': detailId, 'aria-describedby': tipId },
    h('span', { class: `span-kind kind-${kind}`, text: span.kind || 'span' }), ' ', span.name);
  const detail = detailOf(span, call);
  detail.id = detailId;
  detail.hidden = true;
  button.addEventListener('click', () => {
    detail.hidden = !detail.hidden;
    button.setAttribute('aria-expanded', String(!detail.hidden));
  });
  const bar = svg('svg', { class: 'span-track', viewBox: '0 0 1000 10', preserveAspectRatio: 'none', 'aria-hidden': 'true' },
    svg('rect', { x: Math.min(x, 998), y: 1, width: Math.min(w, 1000 - Math.min(x, 998)), height: 8, rx: 1, class: `span-bar kind-${kind}${span.status === 'error' ? ' failed' : ''}` }));
  return h('li', { class: `span-row depth-${Math.min(MAX_DEPTH, Number(span.depth) || 0)}`, dataset: { spanId: span.id, kind: span.kind || '' } },
    h('div', { class: 'span-line' }, button, bar,
      h('div', { class: 'span-tip', role: 'tooltip', id: tipId, text: numbers(span).join(' · ') })),
    detail);
}

// Depth from the parent links when the trace did not say it.
function withDepth(spans) {
  const byId = new Map(spans.map((s) => [s.id, s]));
  const depthOf = (s, seen = new Set()) => {
    if (Number.isFinite(s.depth)) return s.depth;
    const parent = s.parentId && byId.get(s.parentId);
    if (!parent || seen.has(s.id)) return 0;
    seen.add(s.id);
    return depthOf(parent, seen) + 1;
  };
  return spans.map((s) => ({ ...s, depth: depthOf(s) }));
}

// Parents first, each followed by its children in start order.
function ordered(spans) {
  const children = new Map();
  const ids = new Set(spans.map((s) => s.id));
  for (const s of spans) {
    const key = s.parentId && ids.has(s.parentId) ? s.parentId : null;
    if (!children.has(key)) children.set(key, []);
    children.get(key).push(s);
  }
  const out = [];
  const walk = (key) => {
    for (const s of (children.get(key) || []).sort((a, b) => a.startMs - b.startMs)) {
      out.push(s);
      walk(s.id);
    }
  };
  walk(null);
  return out;
}

export function drawTimeline(trace, run) {
  const spans = ordered(withDepth(trace.spans || []));
  if (!spans.length) return h('p', { class: 'empty', text: 'No spans were recorded for this run.' });
  const total = Math.max(Number(trace.durationMs) || 0, ...spans.map((s) => Number(s.endMs) || 0));
  const calls = run.toolCalls || [];
  const totals = spans.reduce((sum, s) => {
    const a = s.attributes || {};
    if (s.kind === 'chat' || a[A.op] === 'chat') {
      sum.calls += 1;
      sum.tokens += (a[A.input] || 0) + (a[A.output] || 0);
      sum.cost += Number(a[A.cost] || 0);
    }
    return sum;
  }, { calls: 0, tokens: 0, cost: 0 });
  return h('div', { class: 'timeline-box' },
    h('p', { class: 'muted timeline-summary' },
      `${fmtMs(total)} · ${fmtNum(spans.length)} spans · ${fmtNum(totals.calls)} model call${totals.calls === 1 ? '' : 's'} · ${fmtNum(totals.tokens)} tokens · ${fmtCost(totals.cost)}`,
      trace.truncated ? ` · ${fmtNum(trace.droppedSpans || 0)} later spans were not kept (size cap)` : null),
    h('p', { class: 'muted small-text', text: 'Hover or focus a span for its numbers; open it for its details.' }),
    h('div', { class: 'timeline-head' }, h('span', { class: 'span-head', text: 'Span' }), axis(total)),
    h('ol', { class: 'timeline', 'aria-label': 'Spans of the run, nested by parent' }, spans.map((s) => row(s, total, calls))));
}

// The run page's section: the trace when the run has one.
export async function timelineSection(section, run) {
  let trace;
  try {
    trace = await get(`/api/runs/${id(run.id)}/trace`);
  } catch (err) {
    if (err.status === 404) {
      clear(section, h('h2', { id: 'timeline', text: 'Timeline' }), h('p', { class: 'empty', text: run.status === 'succeeded' || run.status === 'failed' ? 'No timeline was recorded for this run.' : 'The timeline is written when the turn ends.' }));
      return;
    }
    clear(section, h('h2', { id: 'timeline', text: 'Timeline' }), errorBox(err));
    return;
  }
  clear(section, h('h2', { id: 'timeline', text: 'Timeline' }), drawTimeline(trace, run));
}
