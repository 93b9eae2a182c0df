// Runs across agents (GET /api/runs): filtered by agent, kind, status (a run awaiting a person's
// approval too), a date range and words, paged; the filters live in the address so a view can be
// shared or reloaded. Also a council lead's member runs (for its run page) and an agent's
// decisions, each with its conviction history.
import { get, all, id } from './api.js';
import { h, clear, badge, fmtTime, fmtCost, moreButton, errorBox, table } from './ui.js';
import { field } from './forms.js';

const KINDS = ['chat', 'heartbeat', 'manual', 'reexamination', 'council_member'];
const STATUSES = ['queued', 'running', 'awaiting_approval', 'succeeded', 'failed'];
const FILTERS = ['agentId', 'kind', 'status', 'since', 'until', 'q'];
const words = (value) => value.replace(/_/g, ' ');

function choice(name, label, options) {
  return h('select', { id: `runs-${name}`, name },
    h('option', { value: '' }, `Any ${label}`), options.map(([value, text]) => h('option', { value }, text)));
}

export async function runs(main) {
  const agents = await all('/api/agents');
  const names = new Map(agents.map((a) => [a.id, a.name]));
  // Read from the address as it is: the router decodes its parts, and a search may hold "&".
  const chosen = new URLSearchParams(location.hash.split('?')[1] || '');
  const controls = {
    agentId: choice('agentId', 'agent', agents.map((a) => [a.id, a.name])),
    kind: choice('kind', 'kind', KINDS.map((k) => [k, words(k)])),
    status: choice('status', 'status', STATUSES.map((s) => [s, words(s)])),
    since: h('input', { type: 'date', id: 'runs-since', name: 'since' }),
    until: h('input', { type: 'date', id: 'runs-until', name: 'until' }),
    q: h('input', { type: 'search', id: 'runs-q', name: 'q', maxlength: 200, placeholder: 'words in the prompt, result or error' }),
  };
  for (const name of FILTERS) controls[name].value = chosen.get(name) || '';
  const form = h('form', { class: 'filters runs-filters', role: 'search', 'aria-label': 'Filter runs' },
    field('Agent', controls.agentId), field('Kind', controls.kind), field('Status', controls.status),
    field('From (day)', controls.since), field('To (day)', controls.until), field('Search', controls.q),
    h('button', { type: 'submit' }, 'Apply'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const name of FILTERS) if (controls[name].value.trim()) next.set(name, controls[name].value.trim());
    location.hash = `#/runs${[...next].length ? `?${next}` : ''}`;
  });
  const results = h('div', { class: 'runs-results', 'aria-live': 'polite' });
  const more = h('div');
  let rows = [];
  const columns = [
    { label: 'Run', cell: (r) => h('a', { href: `#/runs/${id(r.id)}`, text: fmtTime(r.createdAt) }) },
    { label: 'Agent', cell: (r) => h('a', { href: `#/agents/${id(r.agentId)}`, text: names.get(r.agentId) || 'a deleted agent' }) },
    { label: 'Kind', cell: (r) => words(r.kind) },
    { label: 'Status', cell: (r) => badge(words(r.status), r.status) },
    { label: 'Prompt', cell: (r) => h('span', { class: 'prompt-cell', text: r.prompt ? r.prompt.slice(0, 120) : '—' }) },
    { label: 'Cost', cell: (r) => (r.usage ? fmtCost(r.usage.costUsd) : '—') },
  ];
  const filtered = FILTERS.some((name) => chosen.get(name));
  const load = async (nextToken) => {
    const page = await get('/api/runs', { ...Object.fromEntries(FILTERS.map((n) => [n, chosen.get(n) || undefined])), nextToken });
    rows = nextToken ? rows.concat(page.items) : page.items;
    clear(results, table(columns, rows, { empty: filtered ? 'No runs match these filters.' : 'No runs yet.', caption: `${rows.length}${page.nextToken ? '+' : ''} run${rows.length === 1 && !page.nextToken ? '' : 's'}` }));
    clear(more, moreButton(page.nextToken, load));
  };
  clear(main, h('div', { class: 'page-head' }, h('h1', { text: 'Runs' })), form, results, more);
  try { await load(); } catch (err) { clear(results, errorBox(err)); }
}

// A council lead's run page: the runs its members did for it.
export async function councilMembers(section, run) {
  const members = await all('/api/runs', { councilRunId: run.id }, 200);
  if (!members.length) { section.remove(); return; }
  const names = new Map((await all('/api/agents')).map((a) => [a.id, a.name]));
  clear(section, h('h2', { text: `Council members (${members.length})` }), table([
    { label: 'Member run', cell: (r) => h('a', { href: `#/runs/${id(r.id)}`, text: fmtTime(r.createdAt) }) },
    { label: 'Agent', cell: (r) => h('a', { href: `#/agents/${id(r.agentId)}`, text: names.get(r.agentId) || r.agentId }) },
    { label: 'Status', cell: (r) => badge(r.status) },
    { label: 'Cost', cell: (r) => (r.usage ? fmtCost(r.usage.costUsd) : '—') },
  ], members));
}

// An agent's decisions (its runs' result cards), newest first, each with how its conviction moved
// when it was re-examined.
export async function decisions(main, agentId) {
  const agent = await get(`/api/agents/${id(agentId)}`);
  const list = h('div', { class: 'decisions' });
  const more = h('div');
  clear(main, h('div', { class: 'page-head' },
    h('h1', {}, h('a', { href: `#/agents/${id(agent.id)}`, text: agent.name }), ' · decisions'),
    h('a', { href: `#/runs?agentId=${id(agent.id)}`, class: 'button secondary' }, 'All its runs')), list, more);
  const load = async (nextToken) => {
    const page = await get(`/api/agents/${id(agent.id)}/decisions`, { limit: 20, nextToken });
    if (!nextToken) list.replaceChildren();
    if (!page.items.length && !nextToken) list.append(h('p', { class: 'empty', text: 'No decisions yet: a run with a card type records one.' }));
    // A re-examination is a step of its parent's conviction history, shown there, not a decision.
    const views = page.items.filter((d) => d.cardType !== 're-examination').map((d) => {
      const history = h('div', { class: 'conviction-history muted', text: 'Loading its conviction history…' });
      convictionHistory(history, d).catch((err) => clear(history, errorBox(err)));
      return h('article', { class: 'card decision' },
        h('div', {}, badge(d.action || 'decision', 'card'), ' ', h('a', { href: `#/runs/${id(d.runId)}`, text: fmtTime(d.createdAt) }), d.cardType ? h('span', { class: 'muted', text: ` · ${d.cardType}` }) : null),
        h('p', { text: d.summary || d.entry }), history);
    });
    list.append(...views);
    clear(more, moreButton(page.nextToken, load));
  };
  await load();
}

async function convictionHistory(slot, decision) {
  const first = decision.card && Number.isFinite(decision.card.conviction_score) ? decision.card.conviction_score : null;
  const later = (await all(`/api/runs/${id(decision.runId)}/re-examinations`, {}, 200))
    .filter((r) => r.result && r.result.card && Number.isFinite(r.result.card.conviction_score));
  if (first === null && !later.length) { clear(slot, 'No conviction score; not re-examined.'); return; }
  const steps = [first === null ? null : `${first} (at the decision)`, ...later.map((r) => `${r.result.card.conviction_score} (${fmtTime(r.createdAt)})`)].filter(Boolean);
  clear(slot, h('strong', { text: 'Conviction: ' }), steps.join(' → '));
}
