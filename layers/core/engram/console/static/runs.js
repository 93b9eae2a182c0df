// Runs: an agent's runs as a table and "Run now"; a run's detail with its card, prompt, session
// revisions and error; re-examine, the re-examination history (a conviction-over-time chart and
// the list), resolve/expire; and a council run's memory, keys grouped by namespace with sizes
// first and each value opened on demand.
import { get, post, patch, all, id } from './api.js';
import {
  h, clear, busy, badge, fmtTime, fmtDuration, fmtCost, fmtNum, fmtBytes, moreButton, pretty, errorBox, errorTitle, notice, table,
} from './ui.js';
import { field, showFormError } from './forms.js';
import { timeChart } from './chart.js';
import { councilMembers } from './allruns.js';
import { approvalCard, decidedLine, held, nap, WAITING_POLL_MS } from './approvals.js';
import { timelineSection } from './timeline.js';

const POLL_MS = 1500;
const NAMESPACES = ['input', 'task', 'shared', 'step'];
const keys = (n) => `${n} ${n === 1 ? 'key' : 'keys'}`;
const ended = (run) => run.status === 'succeeded' || run.status === 'failed';
// Start and end of the run's own turn (records from before startedAt/finishedAt fall back to
// createdAt/updatedAt): acting on a run later never moves them.
const startOf = (run) => run.startedAt || run.createdAt;
const endOf = (run) => (ended(run) ? run.finishedAt || run.updatedAt : null);
const duration = (run) => (ended(run) ? fmtDuration(startOf(run), endOf(run)) : '…');
// The card's decision word, as GET /api/agents/{id}/decisions names it.
function decisionOf(card) {
  for (const k of ['decision', 'action', 'suggested_action']) if (typeof card[k] === 'string' && card[k]) return card[k];
  return null;
}

function runRow(run) {
  return h('tr', { dataset: { runId: run.id } },
    h('td', { 'data-label': 'Run' }, h('a', { href: `#/runs/${id(run.id)}`, text: run.id.slice(-10) })),
    h('td', { 'data-label': 'Kind', text: run.kind }),
    h('td', { 'data-label': 'Trigger', text: run.trigger }),
    h('td', { 'data-label': 'Status' }, badge(run.status)),
    h('td', { 'data-label': 'Started', text: fmtTime(startOf(run)) }),
    h('td', { 'data-label': 'Finished', text: ended(run) ? fmtTime(endOf(run)) : '…' }),
    h('td', { 'data-label': 'Duration', text: duration(run) }),
    h('td', { 'data-label': 'Cost', text: run.usage ? fmtCost(run.usage.costUsd) : '—' }),
    h('td', { 'data-label': 'Decision' },
      run.result && run.result.card ? badge(decisionOf(run.result.card) || run.result.cardType || 'card', 'card') : null,
      run.result && run.result.card && decisionOf(run.result.card) ? h('span', { class: 'muted small-text', text: ` ${run.result.cardType || ''} ` }) : null,
      run.latestConviction !== null && run.latestConviction !== undefined ? badge(`conviction ${run.latestConviction}`, 'conviction') : null,
      run.resolutionStatus ? badge(run.resolutionStatus) : null));
}

export async function list(main, agentId) {
  const agent = await get(`/api/agents/${id(agentId)}`);
  const tbody = h('tbody', {}, h('tr', {}, h('td', { colspan: 9, class: 'loading', text: 'Loading runs…' })));
  const more = h('div');
  const load = async (nextToken) => {
    const page = await get(`/api/agents/${id(agent.id)}/runs`, { nextToken });
    if (!nextToken) tbody.replaceChildren();
    if (!page.items.length && !nextToken) tbody.append(h('tr', {}, h('td', { colspan: 9, class: 'empty', text: 'No runs yet.' })));
    tbody.append(...page.items.map(runRow));
    clear(more, moreButton(page.nextToken, load));
  };

  const prompt = h('textarea', { name: 'prompt', rows: 2, placeholder: agent.defaultPrompt || 'What should it do?' });
  const inputs = h('textarea', { name: 'inputs', rows: 2, placeholder: '{"ticker": "ACME"}', spellcheck: 'false' });
  const runNow = h('form', { class: 'card run-now' }, h('h2', { text: 'Run now' }), h('div', { class: 'form-error' }),
    field('Prompt (optional: the default prompt otherwise)', prompt),
    field('Inputs (optional JSON object, stored as input:<name>)', inputs),
    h('button', { type: 'submit' }, 'Run now'));
  runNow.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = {};
    if (prompt.value.trim()) body.prompt = prompt.value.trim();
    if (inputs.value.trim()) {
      try {
        body.inputs = JSON.parse(inputs.value);
      } catch (err) {
        showFormError(runNow, { code: 'invalid_json', message: `inputs: ${err.message}`, field: 'inputs' });
        return;
      }
    }
    const submit = runNow.querySelector('button[type=submit]');
    submit.disabled = true;
    try {
      const started = await post(`/api/agents/${id(agent.id)}/runs`, body);
      location.hash = `#/runs/${id(started.runId)}`;
    } catch (err) {
      showFormError(runNow, err);
    } finally {
      submit.disabled = false;
    }
  });
  const refresh = h('button', { type: 'button', class: 'secondary' }, 'Refresh');
  refresh.addEventListener('click', () => busy(refresh, () => load()));
  clear(main,
    h('div', { class: 'page-head' }, h('h1', {}, h('a', { href: `#/agents/${id(agent.id)}` }, agent.name), ' · runs'),
      h('div', { class: 'actions' },
        h('a', { href: `#/runs?agentId=${id(agent.id)}`, class: 'button secondary' }, 'Filter and search'),
        h('a', { href: `#/agents/${id(agent.id)}/decisions`, class: 'button secondary' }, 'Decisions'), refresh)),
    h('div', { class: 'table-wrap' }, h('table', { class: 'runs-table' },
      h('thead', {}, h('tr', {}, ['Run', 'Kind', 'Trigger', 'Status', 'Started', 'Finished', 'Duration', 'Cost', 'Decision'].map((t) => h('th', { scope: 'col', text: t })))),
      tbody)),
    more, runNow);
  await load();
}

export async function detail(main, runId) {
  let run = await get(`/api/runs/${id(runId)}`);
  const body = h('div');
  clear(main, body);
  await render(body, run);
  // A run that is still going (or waits for a decision) is followed until it ends; the page is
  // drawn again when its status changes (not while a note is being written in an approval card).
  // A run waiting for a person is asked less often (it may wait a day), except in the half minute
  // after an approval card was shown or decided here (`engram:approvals`, which also asks at once).
  const going = (r) => r.status === 'queued' || r.status === 'running' || r.status === 'awaiting_approval';
  let touched = Date.now();
  while (going(run) && body.isConnected) {
    const idle = run.status === 'awaiting_approval' && Date.now() - touched > 30_000;
    if (await nap(idle ? WAITING_POLL_MS : POLL_MS)) touched = Date.now();
    if (!body.isConnected) return;
    const before = run.status;
    run = await get(`/api/runs/${id(runId)}`);
    if (run.status !== before || !going(run)) await render(body, run);
    else body.querySelector('.run-status')?.replaceChildren(badge(run.status));
  }
}

async function render(body, run) {
  const card = run.result && run.result.card ? run.result.card : null;
  const cardType = run.result && run.result.cardType ? run.result.cardType : null;
  let type = null;
  const typeRead = cardType && cardType !== 're-examination' ? get(`/api/card-types/${id(cardType)}`).catch(() => null) : null;
  const agentRead = get(`/api/agents/${id(run.agentId)}`).catch(() => null);
  type = await typeRead;
  const agentName = (await agentRead)?.name;
  const closed = run.resolutionStatus === 'resolved' || run.resolutionStatus === 'expired';
  const reExaminable = card && run.status === 'succeeded' && run.kind !== 'reexamination' && run.kind !== 'council_member'
    && type && type.reExaminable && !(type.reExaminable === 'until_resolved' && closed);

  const facts = [
    ['Agent', h('a', { href: `#/agents/${id(run.agentId)}` }, agentName || run.agentId)],
    ['Kind', run.kind], ['Trigger', run.trigger],
    ['Status', h('span', { class: 'run-status' }, badge(run.status))],
    ['Queued', fmtTime(run.createdAt)],
    ['Started', run.startedAt || ended(run) ? fmtTime(startOf(run)) : '…'], ['Finished', ended(run) ? fmtTime(endOf(run)) : '…'],
    ['Duration', duration(run)],
    ['Model', run.model || '—'],
    ['Session', run.sessionId ? h('a', { href: `#/agents/${id(run.agentId)}/chat/${id(run.sessionId)}` }, run.sessionId) : 'clean slate (no session)'],
    ['Session revisions', run.sessionId ? `${run.sessionRevisionBefore ?? '—'} → ${run.sessionRevisionAfter ?? '—'}` : '—'],
    ['Usage', run.usage ? `${fmtNum(run.usage.inputTokens)} in · ${fmtNum(run.usage.outputTokens)} out · ${fmtCost(run.usage.costUsd)}` : '—'],
    ['Parent run', run.parentRunId ? h('a', { href: `#/runs/${id(run.parentRunId)}` }, run.parentRunId) : '—'],
    ['Council run', run.councilRunId ? h('a', { href: `#/runs/${id(run.councilRunId)}` }, run.councilRunId) : '—'],
    ['Resolution', run.resolutionStatus || '—'],
  ];

  const actions = h('div', { class: 'actions decision-actions' });
  if (card && type && type.reExaminable === 'until_resolved' && closed && run.kind !== 'reexamination') {
    actions.append(h('p', { class: 'muted re-examine-note', text: `Not re-examined any more: this decision is ${run.resolutionStatus} (Reopen it to re-examine).` }));
  } else if (card) {
    const reexamine = h('button', { type: 'button', id: 're-examine', disabled: !reExaminable, title: reExaminable ? 'Run the agent again and judge whether this still holds' : (closed ? 'Resolved or expired decisions are not re-examined' : 'This card type is not re-examinable') }, 'Re-examine');
    reexamine.addEventListener('click', () => busy(reexamine, async () => {
      const started = await post(`/api/runs/${id(run.id)}/re-examine`);
      const queued = notice(`Re-examination ${started.runId} queued; this page follows it.`, undefined, { sticky: true });
      await followChild(started.runId, body, run);
      queued?.remove();
    }));
    actions.append(reexamine);
  }
  if (card) {
    for (const status of ['open', 'resolved', 'expired']) {
      if (run.resolutionStatus === status || (status === 'open' && !run.resolutionStatus)) continue;
      const b = h('button', { type: 'button', class: 'secondary' }, status === 'open' ? 'Reopen' : status === 'resolved' ? 'Resolve' : 'Expire');
      b.addEventListener('click', () => busy(b, async () => {
        const updated = await patch(`/api/runs/${id(run.id)}`, { resolutionStatus: status });
        await render(body, updated);
      }));
      actions.append(b);
    }
  }

  const waitingNow = held(run);
  const decided = (run.pendingApprovals || []).filter((a) => a.decision);
  const approvals = waitingNow.length || decided.length ? h('section', { class: 'card run-approvals', 'aria-labelledby': 'run-approvals-title' },
    h('h2', { id: 'run-approvals-title', text: waitingNow.length ? `Waiting for your approval (${waitingNow.length})` : 'Approvals' }),
    waitingNow.map((a) => approvalCard(run.id, a)),
    decided.map((a) => decidedLine(a))) : null;
  const timeline = h('section', { class: 'card run-timeline', 'aria-labelledby': 'timeline' }, h('h2', { id: 'timeline', text: 'Timeline' }), h('p', { class: 'loading', text: 'Loading…' }));
  const history = h('section', { class: 'card reexaminations' });
  const memory = h('section', { class: 'card run-memory' });
  const council = h('section', { class: 'card council-members' });
  const mayLead = run.kind === 'heartbeat' || run.kind === 'manual';
  clear(body,
    h('div', { class: 'page-head' }, h('h1', { text: `Run ${run.id}` })),
    approvals,
    h('div', { class: 'columns' },
      h('section', { class: 'card' }, h('h2', { text: 'Run' }), h('dl', { class: 'facts' }, facts.map(([k, v]) => [h('dt', { text: k }), h('dd', {}, v)]))),
      h('div', {},
        run.error ? h('section', { class: 'card' }, h('h2', { text: 'Error' }), errorBox(run.error)) : null,
        card ? h('section', { class: 'card decision-card' }, h('h2', { text: `Card: ${cardType}` }),
          h('dl', { class: 'facts' }, Object.entries(card).map(([k, v]) => [h('dt', { text: k }), h('dd', { text: pretty(v) })])),
          actions) : null,
        run.result && run.result.reply ? h('section', { class: 'card' }, h('h2', { text: 'Reply' }), h('div', { class: 'reply', text: run.result.reply })) : null)),
    timeline,
    h('section', { class: 'card' }, h('h2', { text: 'Prompt' }), h('pre', { class: 'prompt', text: run.prompt || '—' })),
    run.toolCalls && run.toolCalls.length ? h('section', { class: 'card' }, h('h2', { text: 'Tool calls' }),
      run.toolCalls.map((c) => h('details', { class: `tool-call${c.isError ? ' tool-error' : ''}` }, h('summary', {}, h('span', { class: 'tool-name', text: c.name }), audit(c)),
        h('div', { class: 'tool-io' }, h('div', { class: 'label', text: 'Input' }), h('pre', { text: pretty(c.input) }),
          h('div', { class: 'label', text: 'Result' }), h('pre', { text: pretty(c.result) }),
          c.inputSha256 ? h('p', { class: 'muted small-text digest', text: `SHA-256 of the input ${c.inputSha256}, of the result ${c.resultSha256 || '—'}` }) : null)))) : null,
    card && run.kind !== 'reexamination' ? history : null,
    mayLead ? council : null,
    memory);
  const jobs = [runMemory(memory, run), timelineSection(timeline, run)];
  if (mayLead) jobs.push(councilMembers(council, run).catch((err) => clear(council, errorBox(err))));
  if (card && run.kind !== 'reexamination') jobs.push(reexaminations(history, run));
  await Promise.all(jobs);
}

// A held call's decision, as the run's audit records it (TL10).
function audit(call) {
  if (!call.decision) return null;
  const word = call.decision === 'approve' ? 'approved' : 'denied';
  const who = call.decidedBy === 'expired' ? 'expired, so denied' : `${word}${call.decidedBy ? ` by ${call.decidedBy}` : ''}`;
  return h('span', { class: `muted call-audit ${word}`, text: ` · ${who}${call.decidedAt ? ` ${fmtTime(call.decidedAt)}` : ''}${call.note ? ` (“${call.note}”)` : ''}` });
}

async function followChild(childId, body, parent) {
  for (;;) {
    await new Promise((r) => setTimeout(r, POLL_MS));
    if (!body.isConnected) return;
    const child = await get(`/api/runs/${id(childId)}`);
    if (child.status === 'succeeded' || child.status === 'failed') {
      await render(body, await get(`/api/runs/${id(parent.id)}`));
      return;
    }
  }
}

async function reexaminations(section, run) {
  const items = await all(`/api/runs/${id(run.id)}/re-examinations`, {}, 500);
  const scored = items.filter((r) => r.result && r.result.card && Number.isFinite(r.result.card.conviction_score));
  clear(section, h('h2', { text: 'Conviction history' }),
    scored.length ? timeChart({
      title: 'Conviction over time',
      series: [{ name: 'conviction score', cls: 'conviction', points: scored.map((r) => ({ t: r.createdAt, y: r.result.card.conviction_score, label: `${r.result.card.conviction_score} · ${r.result.card.suggested_action || ''} · ${fmtTime(r.createdAt)}` })) }],
      yMax: 100,
    }) : null,
    table([
      { label: 'When', cell: (r) => h('a', { href: `#/runs/${id(r.id)}` }, fmtTime(r.createdAt)) },
      { label: 'Status', cell: (r) => badge(r.status) },
      { label: 'Score', cell: (r) => String(r.result?.card?.conviction_score ?? '—') },
      { label: 'Suggested action', cell: (r) => r.result?.card?.suggested_action || '—' },
      { label: 'Notes', cell: (r) => r.result?.card?.notes || (r.error ? r.error.message || errorTitle(r.error.code) : '—') },
    ], items, { empty: 'Not re-examined yet.' }));
}

// Run memory (RM1): keys grouped by namespace, sizes first; a value is fetched into view on click.
async function runMemory(section, run) {
  let entries;
  try {
    entries = await all(`/api/runs/${id(run.id)}/memory`, {}, 1000);
  } catch (err) {
    clear(section, h('h2', { text: 'Run memory' }), errorBox(err));
    return;
  }
  if (!entries.length) {
    section.remove();
    return;
  }
  entries = entries.sort((a, b) => a.key.localeCompare(b.key));
  const groups = NAMESPACES.map((ns) => [ns, entries.filter((e) => e.key.startsWith(`${ns}:`))]).filter(([, list]) => list.length);
  const council = run.councilRunId || entries.some((e) => e.key.startsWith('task:'));
  clear(section, h('h2', { text: council ? 'Council run memory' : 'Run memory' }),
    h('p', { class: 'muted', text: `${keys(entries.length)} · ${fmtBytes(entries.reduce((n, e) => n + e.valueBytes, 0))}. Open a key to see its value.` }),
    groups.map(([ns, list]) => h('div', { class: 'namespace', dataset: { namespace: ns } },
      h('h3', {}, `${ns}:`, h('span', { class: 'muted', text: ` ${keys(list.length)} · ${fmtBytes(list.reduce((n, e) => n + e.valueBytes, 0))}` })),
      list.map((e) => {
        const value = h('pre', { class: 'memory-value' });
        const item = h('details', { class: 'memory-entry', dataset: { key: e.key } },
          h('summary', {}, h('code', { text: e.key }), h('span', { class: 'muted', text: ` ${fmtBytes(e.valueBytes)}${e.title ? ` · ${e.title}` : ''}${e.source ? ` · from ${e.source}` : ''}` })),
          e.description ? h('p', { class: 'muted', text: e.description }) : null, value);
        // The value is put in the page only when opened (progressive disclosure, as memory_read).
        item.addEventListener('toggle', () => { if (item.open && !value.textContent) value.textContent = pretty(e.value); });
        return item;
      }))));
}
