// Usage: tokens and cost per agent and per session over a date range, with automatic memory
// extraction (`memory-extract:*` session keys) shown apart from the turns themselves; a chart per
// day, the cost over time per agent, what cost most (agents, sessions), per model and per kind, and
// what the prompt cache saved (GET /api/usage's `breakdown` when the API gives it, else summed
// here from the rows). An agent's page shows its last 30 days (agentUsage).
import { get, patch, all, id } from './api.js';
import { h, clear, fmtCost, fmtNum, fmtTime, table, errorBox, notice, stylesheet } from './ui.js';
import { field, showFormError } from './forms.js';
import { timeChart } from './chart.js';

await stylesheet('insight.css');

const MAX_ROWS = 5000;
const DAY_MS = 86_400_000;
const RANGE_DAYS = 30;
const SERIES = 7; // agents drawn one by one; the rest as "other agents"

// Background memory work: extraction, and the running summaries of sessions (CM8).
const isExtraction = (row) => /^memory-(extract|compact):/.test(String(row.sessionKey || ''));
const isoDay = (ms) => new Date(ms).toISOString().slice(0, 10);
const dayOf = (row) => String(row.createdAt).slice(0, 10);

export function lastDays(n, to = isoDay(Date.now())) {
  return { from: isoDay(new Date(`${to}T00:00:00Z`).getTime() - (n - 1) * DAY_MS), to };
}

// Every page of usage rows (up to MAX_ROWS), and the API's breakdown of the range from the first.
async function usageRows(query) {
  const rows = [];
  let nextToken;
  let breakdown = null;
  do {
    const page = await get('/api/usage', { ...query, limit: 100, nextToken });
    rows.push(...page.items);
    if (!breakdown && page.breakdown) breakdown = page.breakdown;
    nextToken = page.nextToken;
  } while (nextToken && rows.length < MAX_ROWS);
  return { rows, breakdown, truncated: Boolean(nextToken) };
}

export async function usage(main, query) {
  const chosen = new URLSearchParams(query || '');
  const agentId = chosen.get('agent') || '';
  const agents = await all('/api/agents');
  const names = new Map(agents.map((a) => [a.id, a.name]));
  const pick = h('select', { id: 'usage-agent', name: 'agentId' }, h('option', { value: '' }, 'All agents'),
    agents.map((a) => h('option', { value: a.id }, a.name)));
  pick.value = agentId && names.has(agentId) ? agentId : '';
  const fallback = lastDays(RANGE_DAYS);
  const valid = (d) => (/^\d{4}-\d{2}-\d{2}$/.test(d || '') ? d : null);
  const range = { from: valid(chosen.get('from')) || fallback.from, to: valid(chosen.get('to')) || fallback.to };
  const from = h('input', { type: 'date', id: 'usage-from', name: 'from', value: range.from });
  const to = h('input', { type: 'date', id: 'usage-to', name: 'to', value: range.to });
  const body = h('div');
  const problem = h('div', { class: 'form-error' });
  const go = () => {
    const next = new URLSearchParams();
    if (pick.value) next.set('agent', pick.value);
    if (from.value && from.value !== fallback.from) next.set('from', from.value);
    if (to.value && to.value !== fallback.to) next.set('to', to.value);
    location.hash = `#/usage${[...next].length ? `?${next}` : ''}`;
  };
  const form = h('form', { class: 'usage-range', 'aria-label': 'Usage range' },
    field('Agent', pick), field('From', from), field('To', to), h('button', { type: 'submit' }, 'Show'));
  form.addEventListener('submit', (e) => { e.preventDefault(); go(); });
  clear(main, h('div', { class: 'page-head' }, h('h1', { text: 'Usage' })), form, problem, body);
  // The agent picked is in the address (#/usage?agent=<id>): a link or a reload keeps it.
  pick.addEventListener('change', go);
  clear(body, h('p', { class: 'loading', text: 'Loading…' }));
  let found;
  try {
    found = await usageRows({ agentId: pick.value || undefined, from: range.from, to: range.to });
  } catch (err) {
    clear(body, errorBox(err));
    return;
  }
  const inRange = found.rows.filter((r) => dayOf(r) >= range.from && dayOf(r) <= range.to);
  render(body, inRange, names, found.truncated, await sessionTitles(inRange), found.breakdown, range);
}

const MAX_RUNS_NAMED = 50;
const RUN_KINDS = { heartbeat: 'heartbeat', manual: 'manual run', reexamination: 're-examination', council_member: 'council member', chat: 'chat turn' };

// Session titles of the agents in these rows (one list per agent), keyed agentId + sessionKey;
// a run without a session (its key is its run id) by its kind, for the newest MAX_RUNS_NAMED.
async function sessionTitles(rows) {
  const titles = new Map();
  const agentIds = [...new Set(rows.filter((r) => !isExtraction(r)).map((r) => r.agentId))];
  const runIds = [...new Set(rows.map((r) => String(r.sessionKey)).filter((k) => k.startsWith('run_')))].slice(0, MAX_RUNS_NAMED);
  await Promise.all([
    ...agentIds.map(async (agentId) => {
      try {
        for (const s of await all(`/api/agents/${id(agentId)}/sessions`, {}, 200)) titles.set(`${agentId}\u0000${s.id}`, s.title || s.id);
      } catch { /* the ids stay */ }
    }),
    ...runIds.map(async (runId) => {
      try {
        const run = await get(`/api/runs/${id(runId)}`);
        titles.set(runId, `${RUN_KINDS[run.kind] || run.kind} · ${fmtTime(run.createdAt)}`);
      } catch { /* the id stays */ }
    }),
  ]);
  return titles;
}

// A session row: a link to its chat, or for a run without a session (a clean-slate heartbeat, a
// re-examination) to the run; background memory work is named as such.
function sessionCell(r, titles) {
  const key = String(r.sessionKey);
  if (isExtraction(r)) return key.startsWith('memory-compact:') ? 'session summary' : 'memory extraction';
  if (key.startsWith('run_')) return h('a', { href: `#/runs/${id(key)}` }, titles.get(key) || `run ${key.slice(-10)}`, ' (no session)');
  return h('a', { href: `#/agents/${id(r.agentId)}/chat/${id(key)}` }, titles.get(`${r.agentId}\u0000${key}`) || key);
}

function sum(rows) {
  const out = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0, cacheSavingsUsd: 0, turns: 0 };
  for (const r of rows) {
    out.inputTokens += r.inputTokens || 0;
    out.outputTokens += r.outputTokens || 0;
    out.cacheReadTokens += r.cacheReadTokens || 0;
    out.cacheWriteTokens += r.cacheWriteTokens || 0;
    out.costUsd += Number(r.costUsd || 0);
    out.cacheSavingsUsd += Number(r.cacheSavingsUsd || 0);
    out.turns += 1;
  }
  return out;
}

function groupBy(rows, key) {
  const out = new Map();
  for (const r of rows) {
    const k = key(r);
    if (!out.has(k)) out.set(k, []);
    out.get(k).push(r);
  }
  return out;
}

// What spent the tokens, when the API gives no breakdown: background memory work by its session
// key, the rest as turns and runs.
const kindOf = (r) => (String(r.sessionKey).startsWith('memory-compact:') ? 'summary' : isExtraction(r) ? 'extraction' : 'turns and runs');
const KIND_WORDS = { chat: 'chat', heartbeat: 'heartbeat', manual: 'manual run', council_member: 'council member', reexamination: 're-examination', extraction: 'memory extraction', summary: 'session summary' };

const num = (text) => h('span', { class: 'num', text });
const tokens = (s) => fmtNum((s.inputTokens || 0) + (s.outputTokens || 0));

// The days of the range (every day, zeros included), as chart points of one series.
function daysOf(range) {
  const out = [];
  for (let t = new Date(`${range.from}T00:00:00Z`).getTime(); t <= new Date(`${range.to}T00:00:00Z`).getTime(); t += DAY_MS) out.push(isoDay(t));
  return out;
}

// Cost (or tokens while nothing cost anything) per day and agent over the range: a line per agent,
// the most expensive first; past SERIES agents, the rest together.
function perAgentChart(rows, names, range, byCost) {
  const value = (rs) => (byCost ? sum(rs).costUsd : sum(rs).inputTokens + sum(rs).outputTokens);
  const ranked = [...groupBy(rows, (r) => r.agentId)].sort((a, b) => value(b[1]) - value(a[1]));
  const shown = ranked.slice(0, SERIES);
  const rest = ranked.slice(SERIES).flatMap(([, rs]) => rs);
  const days = daysOf(range);
  const series = [...shown.map(([agentId, rs]) => [names.get(agentId) || 'a deleted agent', rs]), ...(rest.length ? [['other agents', rest]] : [])]
    .map(([name, rs], index) => {
      const perDay = groupBy(rs, dayOf);
      return { name, cls: `s${index}`, points: days.map((d) => {
        const v = value(perDay.get(d) || []);
        return { t: `${d}T12:00:00Z`, y: v, label: `${name} · ${d}: ${byCost ? fmtCost(v) : `${fmtNum(v)} tokens`}` };
      }) };
    });
  if (!series.length || series.every((one) => one.points.every((p) => !p.y))) return h('p', { class: 'empty', text: 'No usage in this range.' });
  return timeChart({ kind: 'line', title: byCost ? 'Cost per day, a line for each' : 'Tokens per day, a line for each', series,
    yFormat: byCost ? (v) => `$${v.toFixed(v < 0.1 ? 3 : 2)}` : (v) => fmtNum(v) });
}

// Today and this month against the limits that apply (the API's `spending`).
function spendingCard(spending, agentName) {
  if (!spending) return null;
  const l = spending.limits || {};
  const against = (spent, limit) => (limit ? `${fmtCost(spent)} of ${fmtCost(limit)}` : `${fmtCost(spent)} (no limit)`);
  return h('div', { class: 'card stat spending' }, h('div', { class: 'muted', text: agentName ? `${agentName}: spent` : 'Spent (all agents)' }),
    h('div', { text: `Today: ${against(spending.todayUsd || 0, l.dailyCostUsd)}` }),
    h('div', { text: `This month: ${against(spending.thisMonthUsd || 0, l.monthlyCostUsd)}` }),
    h('div', { class: 'muted small-text', text: `Resets ${fmtTime(spending.dayResetsAt)} / ${fmtTime(spending.monthResetsAt)}` }));
}

// The person's own limits over all their agents (PATCH /api/me `limits`), beside what they spent.
function userLimitsForm(spending) {
  const l = (spending && spending.limits) || {};
  const input = (name, value) => h('input', { type: 'number', name: `limits.${name}`, min: 0, step: 'any', inputmode: 'decimal', value: value ?? '', placeholder: 'no limit' });
  const form = h('form', { class: 'card user-limits', 'aria-labelledby': 'user-limits-title', novalidate: true },
    h('h2', { id: 'user-limits-title', text: 'Your own limits, over everything you run' }), h('div', { class: 'form-error' }),
    h('div', { class: 'limit-fields' },
      field('Your daily cost limit (USD)', input('dailyCostUsd', l.dailyCostUsd)),
      field('Your monthly cost limit (USD)', input('monthlyCostUsd', l.monthlyCostUsd))),
    h('p', { class: 'hint muted', text: 'Checked before each model call, whichever of yours makes it; empty: no limit.' }),
    h('button', { type: 'submit' }, 'Save limits'));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const limits = {};
    for (const name of ['dailyCostUsd', 'monthlyCostUsd']) {
      const raw = form.elements[`limits.${name}`].value.trim();
      limits[name] = raw ? (Number.isFinite(Number(raw)) ? Number(raw) : raw) : null;
    }
    const submit = form.querySelector('button[type=submit]');
    submit.disabled = true;
    try {
      await patch('/api/me', { limits });
      for (const el of form.querySelectorAll('.field-error, .form-error')) el.replaceChildren();
      notice('Your limits are saved.');
    } catch (err) {
      showFormError(form, err);
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

const costColumns = (first) => [
  first,
  { label: 'Input tokens', cell: (r) => num(fmtNum(r.inputTokens)) },
  { label: 'Output tokens', cell: (r) => num(fmtNum(r.outputTokens)) },
  { label: 'Cache read', cell: (r) => num(fmtNum(r.cacheReadTokens)) },
  { label: 'Cache saved', cell: (r) => num(fmtCost(r.cacheSavingsUsd || 0)) },
  { label: 'Cost', cell: (r) => num(fmtCost(r.costUsd)) },
];

function render(body, rows, names, truncated, titles, breakdown, range) {
  const chat = rows.filter((r) => !isExtraction(r));
  const extraction = rows.filter(isExtraction);
  const total = sum(chat);
  const extract = sum(extraction);
  const whole = breakdown ? breakdown.totals : sum(rows);
  // Cost per day; tokens when nothing cost anything yet (the offline model is free).
  const byCost = total.costUsd + extract.costUsd > 0;
  const value = (s) => (byCost ? s.costUsd : s.inputTokens + s.outputTokens);
  const show = (s) => (byCost ? fmtCost(s.costUsd) : `${fmtNum(s.inputTokens + s.outputTokens)} tokens`);
  const perDay = (list) => [...groupBy(list, dayOf)].map(([d, rs]) => ({ t: `${d}T12:00:00Z`, y: value(sum(rs)), label: `${d}: ${show(sum(rs))} (${fmtNum(rs.length)} calls)` }));
  const agentRows = breakdown && breakdown.agents
    ? breakdown.agents.map((a) => ({ ...a, ex: sum(extraction.filter((r) => r.agentId === a.agentId)) }))
    : [...groupBy(rows, (r) => r.agentId)].map(([agentId, rs]) => ({ agentId, ...sum(rs.filter((r) => !isExtraction(r))), ex: sum(rs.filter(isExtraction)) }));
  agentRows.sort((a, b) => b.costUsd - a.costUsd || (b.inputTokens + b.outputTokens) - (a.inputTokens + a.outputTokens));
  const sessionRows = [...groupBy(rows, (r) => `${r.agentId}\u0000${r.sessionKey}`)].map(([k, rs]) => {
    const [agentId, sessionKey] = k.split('\u0000');
    return { agentId, sessionKey, s: sum(rs), last: rs.map((r) => r.createdAt).sort().pop() };
  });
  const costliest = [...sessionRows].sort((a, b) => value(b.s) - value(a.s)).slice(0, 10);
  sessionRows.sort((a, b) => String(b.last).localeCompare(String(a.last)));
  const models = breakdown ? breakdown.models : [...groupBy(rows, (r) => r.model)].map(([model, rs]) => ({ model, ...sum(rs) }));
  const kinds = breakdown ? breakdown.kinds.map((k) => ({ ...k, kind: KIND_WORDS[k.kind] || k.kind }))
    : [...groupBy(rows, kindOf)].map(([kind, rs]) => ({ kind, ...sum(rs) }));
  for (const list of [models, kinds]) list.sort((a, b) => b.costUsd - a.costUsd);
  const agentName = breakdown && breakdown.agentId ? names.get(breakdown.agentId) : null;
  clear(body,
    h('p', { class: 'muted usage-range-words', text: `${range.from} to ${range.to} (UTC days)` }),
    h('div', { class: 'totals' },
      h('div', { class: 'card stat' }, h('div', { class: 'muted', text: 'Turns and runs' }), h('strong', { text: fmtCost(total.costUsd) }), h('div', { class: 'muted', text: `${tokens(total)} tokens · ${fmtNum(total.turns)} calls` })),
      h('div', { class: 'card stat' }, h('div', { class: 'muted', text: 'Memory extraction' }), h('strong', { text: fmtCost(extract.costUsd) }), h('div', { class: 'muted', text: `${tokens(extract)} tokens · ${fmtNum(extract.turns)} calls` })),
      h('div', { class: 'card stat cache-savings' }, h('div', { class: 'muted', text: 'The prompt cache saved' }), h('strong', { text: fmtCost(whole.cacheSavingsUsd || 0) }),
        h('div', { class: 'muted', text: `${fmtNum(whole.cacheReadTokens || 0)} tokens read from the cache` })),
      breakdown ? spendingCard(breakdown.spending, agentName) : null),
    truncated ? h('p', { class: 'muted', text: `Showing the newest ${fmtNum(rows.length)} usage rows.` }) : null,
    h('section', { class: 'card' }, h('h2', { text: byCost ? 'Cost per day, per agent' : 'Tokens per day, per agent' }), perAgentChart(rows, names, range, byCost)),
    h('section', { class: 'card' }, h('h2', { text: byCost ? 'Cost per day' : 'Tokens per day' }),
      timeChart({ kind: 'bar', title: byCost ? 'Cost per day' : 'Tokens per day', yFormat: byCost ? (v) => `$${v.toFixed(v < 0.1 ? 3 : 2)}` : (v) => fmtNum(v),
        series: [{ name: 'turns and runs', cls: 'turns', points: perDay(chat) }, { name: 'memory extraction', cls: 'extraction', points: perDay(extraction) }] })),
    h('section', { class: 'card' }, h('h2', { text: 'Per agent' }), table([
      ...costColumns({ label: 'Agent', cell: (r) => h('a', { href: `#/agents/${id(r.agentId)}` }, names.get(r.agentId) || r.agentId) }),
      { label: 'Extraction cost', cell: (r) => num(fmtCost(r.ex.costUsd)) },
    ], agentRows, { empty: 'No usage yet.', caption: 'Most expensive first' })),
    h('section', { class: 'card' }, h('h2', { text: 'Sessions that cost most' }), table([
      { label: 'Agent', cell: (r) => h('a', { href: `#/agents/${id(r.agentId)}` }, names.get(r.agentId) || r.agentId) },
      { label: 'Session', cell: (r) => sessionCell(r, titles) },
      { label: 'Tokens', cell: (r) => num(tokens(r.s)) },
      { label: 'Cost', cell: (r) => num(fmtCost(r.s.costUsd)) },
    ], costliest, { empty: 'No usage yet.' })),
    h('div', { class: 'columns' },
      h('section', { class: 'card' }, h('h2', { text: 'Per model' }), table(costColumns({ label: 'Model', cell: (r) => r.model }), models, { empty: 'No usage yet.' })),
      h('section', { class: 'card' }, h('h2', { text: 'Per kind' }), table(costColumns({ label: 'Kind', cell: (r) => r.kind }), kinds, { empty: 'No usage yet.' }))),
    breakdown && breakdown.spending && !breakdown.agentId ? userLimitsForm(breakdown.spending) : null,
    h('section', { class: 'card' }, h('h2', { text: 'Per session' }), table([
      { label: 'Agent', cell: (r) => h('a', { href: `#/agents/${id(r.agentId)}` }, names.get(r.agentId) || r.agentId) },
      { label: 'Session', cell: (r) => sessionCell(r, titles) },
      { label: 'Kind', cell: (r) => (isExtraction(r) ? 'memory work' : 'turns') },
      { label: 'Tokens', cell: (r) => num(tokens(r.s)) },
      { label: 'Cost', cell: (r) => num(fmtCost(r.s.costUsd)) },
      { label: 'Last', cell: (r) => fmtTime(r.last) },
    ], sessionRows, { empty: 'No usage yet.' })));
}

// An agent's page: its last 30 days, cost (or tokens) per day, and what they add up to.
export async function agentUsage(section, agent) {
  const range = lastDays(RANGE_DAYS);
  const page = await get('/api/usage', { agentId: agent.id, limit: 100, from: range.from, to: range.to });
  let rows = page.items;
  if (page.breakdown && page.breakdown.days) {
    rows = page.breakdown.days.map((d) => ({ ...d, createdAt: `${d.date}T12:00:00Z`, agentId: agent.id, sessionKey: '' }));
  } else {
    rows = rows.filter((r) => dayOf(r) >= range.from);
  }
  const s = page.breakdown ? page.breakdown.totals : sum(rows);
  const byCost = s.costUsd > 0;
  const names = new Map([[agent.id, agent.name]]);
  clear(section, h('h2', { text: 'Last 30 days' }),
    h('p', { class: 'muted agent-usage-total', text: `${fmtCost(s.costUsd)} · ${tokens(s)} tokens · the cache saved ${fmtCost(s.cacheSavingsUsd || 0)}` }),
    perAgentChart(rows, names, range, byCost),
    h('a', { href: `#/usage?agent=${id(agent.id)}` }, 'All its usage'));
}
