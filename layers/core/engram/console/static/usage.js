// Usage: tokens and cost per agent and per session over time, with automatic memory extraction
// (`memory-extract:*` session keys) shown apart from the turns themselves; a chart per day.
import { get, all, id } from './api.js';
import { h, clear, field, fmtCost, fmtTime, table, errorBox } from './ui.js';
import { timeChart } from './chart.js';

const MAX_ROWS = 5000;

// Background memory work: extraction, and the running summaries of sessions (CM8).
const isExtraction = (row) => /^memory-(extract|compact):/.test(String(row.sessionKey || ''));

export async function usage(main, agentId) {
  const agents = await all('/api/agents');
  const names = new Map(agents.map((a) => [a.id, a.name]));
  const pick = h('select', { id: 'usage-agent', name: 'agentId' }, h('option', { value: '' }, 'All agents'),
    agents.map((a) => h('option', { value: a.id }, a.name)));
  pick.value = agentId && names.has(agentId) ? agentId : '';
  const body = h('div');
  clear(main, h('div', { class: 'page-head' }, h('h1', { text: 'Usage' }), field('Agent', pick)), body);
  const load = async () => {
    clear(body, h('p', { class: 'loading', text: 'Loading…' }));
    const rows = [];
    let nextToken;
    do {
      const page = await get('/api/usage', { agentId: pick.value || undefined, limit: 100, nextToken });
      rows.push(...page.items);
      nextToken = page.nextToken;
    } while (nextToken && rows.length < MAX_ROWS);
    render(body, rows, names, Boolean(nextToken), await sessionTitles(rows));
  };
  // The agent picked is in the address (#/usage?agent=<id>): a link or a reload keeps it.
  pick.addEventListener('change', () => { location.hash = pick.value ? `#/usage?agent=${id(pick.value)}` : '#/usage'; });
  await load();
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
  const out = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0, turns: 0 };
  for (const r of rows) {
    out.inputTokens += r.inputTokens || 0;
    out.outputTokens += r.outputTokens || 0;
    out.cacheReadTokens += r.cacheReadTokens || 0;
    out.cacheWriteTokens += r.cacheWriteTokens || 0;
    out.costUsd += Number(r.costUsd || 0);
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

function render(body, rows, names, truncated, titles) {
  const chat = rows.filter((r) => !isExtraction(r));
  const extraction = rows.filter(isExtraction);
  const day = (r) => String(r.createdAt).slice(0, 10);
  const total = sum(chat);
  const extract = sum(extraction);
  // Cost per day; tokens when nothing cost anything yet (the offline model is free).
  const byCost = total.costUsd + extract.costUsd > 0;
  const value = (s) => (byCost ? s.costUsd : s.inputTokens + s.outputTokens);
  const show = (s) => (byCost ? fmtCost(s.costUsd) : `${s.inputTokens + s.outputTokens} tokens`);
  const perDay = (list) => [...groupBy(list, day)].map(([d, rs]) => ({ t: `${d}T12:00:00Z`, y: value(sum(rs)), label: `${d}: ${show(sum(rs))} (${rs.length} calls)` }));
  const agentRows = [...groupBy(rows, (r) => r.agentId)].map(([agentId, rs]) => {
    const turns = sum(rs.filter((r) => !isExtraction(r)));
    const ex = sum(rs.filter(isExtraction));
    return { agentId, turns, ex };
  });
  const sessionRows = [...groupBy(rows, (r) => `${r.agentId}\u0000${r.sessionKey}`)].map(([k, rs]) => {
    const [agentId, sessionKey] = k.split('\u0000');
    return { agentId, sessionKey, s: sum(rs), last: rs.map((r) => r.createdAt).sort().pop() };
  }).sort((a, b) => String(b.last).localeCompare(String(a.last)));
  clear(body,
    h('div', { class: 'totals' },
      h('div', { class: 'card stat' }, h('div', { class: 'muted', text: 'Turns and runs' }), h('strong', { text: fmtCost(total.costUsd) }), h('div', { class: 'muted', text: `${total.inputTokens + total.outputTokens} tokens · ${total.turns} calls` })),
      h('div', { class: 'card stat' }, h('div', { class: 'muted', text: 'Memory extraction' }), h('strong', { text: fmtCost(extract.costUsd) }), h('div', { class: 'muted', text: `${extract.inputTokens + extract.outputTokens} tokens · ${extract.turns} calls` }))),
    truncated ? h('p', { class: 'muted', text: `Showing the newest ${rows.length} usage rows.` }) : null,
    h('section', { class: 'card' }, h('h2', { text: byCost ? 'Cost per day' : 'Tokens per day' }),
      timeChart({ kind: 'bar', title: byCost ? 'Cost per day' : 'Tokens per day', yFormat: byCost ? (v) => `$${v.toFixed(v < 0.1 ? 3 : 2)}` : (v) => String(Math.round(v)),
        series: [{ name: 'turns and runs', cls: 'turns', points: perDay(chat) }, { name: 'memory extraction', cls: 'extraction', points: perDay(extraction) }] })),
    h('section', { class: 'card' }, h('h2', { text: 'Per agent' }), table([
      { label: 'Agent', cell: (r) => h('a', { href: `#/agents/${id(r.agentId)}` }, names.get(r.agentId) || r.agentId) },
      { label: 'Input tokens', cell: (r) => String(r.turns.inputTokens) },
      { label: 'Output tokens', cell: (r) => String(r.turns.outputTokens) },
      { label: 'Cache read', cell: (r) => String(r.turns.cacheReadTokens) },
      { label: 'Cost', cell: (r) => fmtCost(r.turns.costUsd) },
      { label: 'Extraction cost', cell: (r) => fmtCost(r.ex.costUsd) },
    ], agentRows, { empty: 'No usage yet.' })),
    h('section', { class: 'card' }, h('h2', { text: 'Per session' }), table([
      { label: 'Agent', cell: (r) => h('a', { href: `#/agents/${id(r.agentId)}` }, names.get(r.agentId) || r.agentId) },
      { label: 'Session', cell: (r) => sessionCell(r, titles) },
      { label: 'Kind', cell: (r) => (isExtraction(r) ? 'memory work' : 'turns') },
      { label: 'Tokens', cell: (r) => String(r.s.inputTokens + r.s.outputTokens) },
      { label: 'Cost', cell: (r) => fmtCost(r.s.costUsd) },
      { label: 'Last', cell: (r) => fmtTime(r.last) },
    ], sessionRows, { empty: 'No usage yet.' })));
}
