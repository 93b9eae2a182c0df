// An agent: create, edit every field, delete, and the agent page with its Active Memory panel
// (the list is agents.js, the first load's page; this module loads when one of these opens).
import { get, post, patch, del, all, id } from './api.js';
import { h, clear, table, busy, notice, badge, fmtTime, fmtAge, errorBox } from './ui.js';
import { confirmAction, field, showFormError, dialog, secretBox } from './forms.js';

export async function create(main) {
  await form(main, null);
}

export async function edit(main, agentId) {
  const agent = await get(`/api/agents/${id(agentId)}`);
  await form(main, agent);
}

async function form(main, agent) {
  const [workspaces, cardTypes, agents, connections, rules] = await Promise.all([
    all('/api/workspaces'), all('/api/card-types'), all('/api/agents'), all('/api/connections'), import('./rules.js'),
  ]);
  const a = agent || {};
  const input = (name, attrs = {}) => h('input', { name, value: a[name] ?? '', ...attrs });
  const area = (name, rows = 4) => h('textarea', { name, rows, value: a[name] ?? '' });
  const check = (name) => h('input', { type: 'checkbox', name, checked: Boolean(a[name]) });
  const select = (name, options, noneLabel) => {
    const el = h('select', { name }, h('option', { value: '' }, noneLabel),
      options.map(([value, label]) => h('option', { value }, label)));
    el.value = a[name] || '';
    return el;
  };
  const team = new Set(a.team || []);
  const others = agents.filter((x) => !agent || x.id !== agent.id);
  const teamBox = h('fieldset', { class: 'team', name: 'team' }, h('legend', { text: 'Team (makes this agent a council lead)' }),
    others.length ? null : h('p', { class: 'muted', text: 'No other agents yet: create specialists first, then pick them here.' }),
    others.map((x) => {
      const box = h('input', { type: 'checkbox', value: x.id, checked: team.has(x.id), id: `team-${x.id}` });
      return h('div', { class: 'check' }, box, h('label', { for: `team-${x.id}`, text: x.name }));
    }));
  const toolsBox = await toolPicker(connections, a.tools || [], rules);
  const activeMemory = check('activeMemory');
  const amWarning = h('div', { class: 'warn-text', text: 'Active Memory shares one growing session between chat and scheduled runs: runs get slower and costlier until you reset it.' });
  const form = h('form', { class: 'agent-form card', novalidate: true },
    h('div', { class: 'form-error' }),
    field('Name', input('name', { required: true, maxlength: 100 })),
    field('Persona', area('persona', 5)),
    field('Model', input('model', { placeholder: 'the deployment default', pattern: '[A-Za-z0-9._:\\-]{1,100}' }), 'Leave empty for the deployment\u2019s chat model.'),
    field('Workspace', select('workspaceId', workspaces.map((w) => [w.id, w.name]), 'No workspace')),
    field('Schedule', input('schedule', { placeholder: 'rate(1 hour) or cron(0 9 * * ? *)' }), 'An EventBridge Scheduler expression; needs a default prompt.'),
    field('Default prompt', area('defaultPrompt', 3)),
    field('Card type', select('cardType', cardTypes.map((c) => [c.name, c.name]), 'No card')),
    field('Agent memory', check('agentMemory')),
    field('Active Memory', activeMemory),
    amWarning,
    field('Review decisions', check('reviewDecisions')),
    h('div', { class: 'field' }, teamBox, h('div', { class: 'field-error', role: 'alert' })),
    h('div', { class: 'field' }, toolsBox, h('div', { class: 'field-error', role: 'alert' })),
    rules.rulesFieldset(agent),
    h('div', { class: 'actions' },
      h('button', { type: 'submit' }, agent ? 'Save' : 'Create agent'),
      h('a', { href: agent ? `#/agents/${id(agent.id)}` : '#/agents', class: 'button secondary' }, 'Cancel')));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const body = {
      name: String(data.get('name') || '').trim(),
      persona: String(data.get('persona') || ''),
      model: String(data.get('model') || '').trim() || null,
      workspaceId: String(data.get('workspaceId') || '') || null,
      schedule: String(data.get('schedule') || '').trim() || null,
      defaultPrompt: String(data.get('defaultPrompt') || ''),
      cardType: String(data.get('cardType') || '') || null,
      agentMemory: form.elements.agentMemory.checked,
      activeMemory: form.elements.activeMemory.checked,
      reviewDecisions: form.elements.reviewDecisions.checked,
      team: [...teamBox.querySelectorAll('input:checked')].map((b) => b.value),
      tools: chosenTools(toolsBox, rules),
      ...rules.readRules(form, agent),
    };
    // The obvious mistakes are caught here, in the API's words, before anything is sent.
    const problem = !body.name ? { code: 'validation_error', field: 'name', message: 'name must not be empty' }
      : body.schedule && !body.defaultPrompt.trim() ? { code: 'missing_default_prompt', field: 'defaultPrompt', message: 'a scheduled agent needs a defaultPrompt: it is what every heartbeat runs' }
        : null;
    if (problem) {
      showFormError(form, problem);
      return;
    }
    const submit = form.querySelector('button[type=submit]');
    submit.disabled = true;
    try {
      const saved = agent ? await patch(`/api/agents/${id(agent.id)}`, body) : await post('/api/agents', body);
      if (!agent && saved.webhookSecret) {
        await dialog({
          title: 'Agent created',
          body: [h('p', { text: 'Its webhook secret, shown this once (sign webhook calls with it):' }), secretBox(saved.webhookSecret)],
          actions: [{ label: 'Done', value: true }],
        });
      }
      location.hash = `#/agents/${id(saved.id)}`;
    } catch (err) {
      showFormError(form, err);
    } finally {
      submit.disabled = false;
    }
  });
  clear(main, h('h1', { text: agent ? `Edit ${agent.name}` : 'New agent' }), form);
  form.elements.name.focus();
}

// The agent's MCP tools: a box per tool server, and under it the server's tools as last listed
// (all ticked means every tool, also those the server adds later).
async function toolPicker(connections, grants, rules) {
  const granted = new Map(grants.map((g) => [g.connectionId, g.allow]));
  const grantOf = new Map(grants.map((g) => [g.connectionId, g]));
  const details = await Promise.all(connections.map((c) => get(`/api/connections/${id(c.id)}`).catch(() => c)));
  return h('fieldset', { class: 'tools', name: 'tools', onchange: (e) => syncServerBox(e.target) }, h('legend', { text: 'Tools (MCP servers this agent may call)' }),
    connections.length ? null : h('p', { class: 'muted' }, 'No tool servers yet: add one under ', h('a', { href: '#/tools', text: 'Tools' }), '.'),
    details.map((c) => {
      const on = granted.has(c.id);
      const allow = granted.get(c.id);
      const box = h('input', { type: 'checkbox', value: c.id, checked: on, id: `tool-${c.id}`, class: 'connection-box' });
      const names = c.tools && c.tools.tools ? c.tools.tools.map((t) => t.name) : [];
      return h('div', { class: 'connection-pick', dataset: { connectionId: c.id, tools: String(names.length) } },
        h('div', { class: 'check' }, box, h('label', { for: `tool-${c.id}`, text: c.name }), h('span', { class: 'muted', text: ` ${c.url}` })),
        names.length ? h('div', { class: 'tool-picks' }, names.map((n) => {
          const tool = h('input', { type: 'checkbox', value: n, checked: !allow || allow.includes(n), id: `tool-${c.id}-${n}`, class: 'tool-box' });
          return h('div', { class: 'check' }, tool, h('label', { for: `tool-${c.id}-${n}`, text: n }));
        })) : h('p', { class: 'muted small', text: 'Its tools are listed on its first use (or Test it under Tools).' }),
        Object.assign(rules.approvalControl(c, names, grantOf.get(c.id)), { hidden: !on }));
    }));
}

// A server is granted only with at least one of its tools: unticking its last tool unticks the
// server, ticking a tool ticks it, and ticking the server with none ticked ticks them all.
function syncServerBox(changed) {
  const row = changed.closest('.connection-pick');
  if (!row) return;
  const server = row.querySelector('.connection-box');
  const tools = [...row.querySelectorAll('.tool-box')];
  // Its approval rule shows while the server is granted.
  if (changed === server || changed.classList.contains('tool-box')) queueMicrotask(() => { row.querySelector('.approval-rule').hidden = !server.checked; });
  if (!tools.length) return;
  if (changed === server) {
    if (server.checked && !tools.some((t) => t.checked)) for (const t of tools) t.checked = true;
  } else {
    server.checked = tools.some((t) => t.checked);
  }
}

function chosenTools(box, rules) {
  const rows = [...box.querySelectorAll('.connection-pick')].filter((row) => {
    const tools = [...row.querySelectorAll('.tool-box')];
    // none of its tools: not granted (never `allow: []`)
    return row.querySelector('.connection-box').checked && (!tools.length || tools.some((t) => t.checked));
  });
  return rows.map((row, index) => {
    rules.nameGrant(row, index);
    const tools = [...row.querySelectorAll('.tool-box')];
    const picked = tools.filter((t) => t.checked).map((t) => t.value);
    const grant = tools.length && picked.length < tools.length ? { connectionId: row.dataset.connectionId, allow: picked } : { connectionId: row.dataset.connectionId };
    const approval = rules.approvalOf(row);
    if (approval !== undefined) grant.requireApproval = approval;
    return grant;
  });
}

export async function detail(main, agentId) {
  const [agent, { rulesInWords }] = await Promise.all([get(`/api/agents/${id(agentId)}`), import('./rules.js')]);
  const toolNames = agent.tools && agent.tools.length
    ? (await all('/api/connections')).filter((c) => agent.tools.some((g) => g.connectionId === c.id)).map((c) => {
      const grant = agent.tools.find((g) => g.connectionId === c.id);
      const asks = grant.requireApproval === true ? ', every call waits for approval'
        : Array.isArray(grant.requireApproval) && grant.requireApproval.length ? `, approval for ${grant.requireApproval.join(', ')}` : '';
      if (!grant.allow) return `${c.name} (all tools${asks})`;
      return grant.allow.length ? `${c.name} (${grant.allow.join(', ')}${asks})` : `${c.name} (no tools)`;
    }).join('; ')
    : '—';
  const [workspace, team] = await Promise.all([
    agent.workspaceId ? get(`/api/workspaces/${id(agent.workspaceId)}`).catch(() => null) : null,
    agent.team && agent.team.length ? Promise.all(agent.team.map((m) => get(`/api/agents/${id(m)}`).catch(() => null))) : [],
  ]);
  const panel = h('section', { class: 'card active-memory', 'aria-labelledby': 'am-title' });
  const sessions = h('section', { class: 'card' });
  const spent = h('section', { class: 'card agent-usage' }, h('h2', { text: 'Last 30 days' }), h('p', { class: 'loading', text: 'Loading…' }));
  const memory = h('section', { class: 'card agent-memory' }, h('h2', { text: 'Memory' }), h('p', { class: 'loading', text: 'Loading…' }));
  const facts = [
    ['Persona', agent.persona || '—'],
    ['Model', agent.model || 'deployment default'],
    ['Workspace', agent.workspaceId ? h('a', { href: `#/memory/workspace/${id(agent.workspaceId)}` }, workspace ? workspace.name : agent.workspaceId) : '—'],
    ['Schedule', agent.schedule || '—'],
    ['Default prompt', agent.defaultPrompt || '—'],
    ['Card type', agent.cardType || '—'],
    ['Agent memory', agent.agentMemory ? 'on' : 'off'],
    ['Active Memory', agent.activeMemory ? 'on' : 'off'],
    ['Review decisions', agent.reviewDecisions ? 'on' : 'off'],
    agent.traceContent !== undefined ? ['Timeline content', agent.traceContent ? 'tool inputs and results kept' : 'off (ids, names, sizes and times only)'] : null,
    ['Team', team.length ? team.map((m, i) => (m ? m.name : agent.team[i])).join(', ') : '—'],
    ['Tools', toolNames],
    ...(() => {
      const rules = rulesInWords(agent);
      return [rules.approvals ? ['Approval', rules.approvals] : null, rules.limits ? ['Limits', rules.limits] : null].filter(Boolean);
    })(),
    ['Created', fmtTime(agent.createdAt)],
    ['Updated', fmtTime(agent.updatedAt)],
  ];
  const remove = h('button', { type: 'button', class: 'danger' }, 'Delete agent');
  remove.addEventListener('click', async () => {
    if (!(await confirmAction(`Delete ${agent.name}? Its sessions, transcripts, memories and runs go with it.`))) return;
    await busy(remove, async () => {
      await del(`/api/agents/${id(agent.id)}`);
      location.hash = '#/agents';
    });
  });
  const rotate = h('button', { type: 'button', class: 'secondary' }, 'New webhook secret');
  rotate.addEventListener('click', () => busy(rotate, async () => {
    const out = await post(`/api/agents/${id(agent.id)}/webhook-secret`);
    await dialog({
      title: 'New webhook secret',
      body: [secretBox(out.webhookSecret),
        h('p', { class: 'muted', text: `The previous secret keeps working until ${fmtTime(out.previousSecretValidUntil)}.` })],
      actions: [{ label: 'Done', value: true }],
    });
  }));
  clear(main,
    h('div', { class: 'page-head' }, h('h1', { text: agent.name }),
      h('div', { class: 'actions' },
        h('a', { href: `#/agents/${id(agent.id)}/chat`, class: 'button' }, 'Chat'),
        h('a', { href: `#/agents/${id(agent.id)}/runs`, class: 'button secondary' }, 'Runs'),
        h('a', { href: `#/memory/agent/${id(agent.id)}`, class: 'button secondary' }, 'Memory'),
        h('a', { href: `#/agents/${id(agent.id)}/edit`, class: 'button secondary' }, 'Edit'))),
    h('div', { class: 'columns' },
      h('section', { class: 'card' }, h('h2', { text: 'Settings' }),
        h('dl', { class: 'facts' }, facts.filter(Boolean).map(([k, v]) => [h('dt', { text: k }), h('dd', {}, v)]))),
      h('div', {}, panel, sessions)),
    spent,
    memory,
    h('div', { class: 'actions' }, rotate, remove));
  const [{ memoryTable }, { agentUsage }] = await Promise.all([import('./memory.js'), import('./usage.js')]);
  await Promise.all([activeMemoryPanel(panel, agent), sessionList(sessions, agent),
    agentUsage(spent, agent).catch((err) => clear(spent, h('h2', { text: 'Last 30 days' }), errorBox(err))),
    memoryTable(memory, `/api/agents/${id(agent.id)}/memories`, agent, 'agent', 'Memory').catch((err) => clear(memory, h('h2', { text: 'Memory' }), errorBox(err)))]);
}

// The Active Memory panel (AM1-AM3): status, runs since reset, session age, last reset, the
// warning past the threshold, and Reset.
export async function activeMemoryPanel(panel, agent) {
  let am;
  try {
    am = await get(`/api/agents/${id(agent.id)}/active-memory`);
  } catch (err) {
    clear(panel, h('h2', { id: 'am-title', text: 'Active Memory' }), errorBox(err));
    return;
  }
  const reset = h('button', { type: 'button' }, 'Reset memory');
  reset.addEventListener('click', () => busy(reset, async () => {
    await post(`/api/agents/${id(agent.id)}/active-memory/reset`);
    notice('Active Memory reset: the next run starts fresh; the messages stay visible.');
    await activeMemoryPanel(panel, agent);
  }));
  clear(panel,
    h('h2', { id: 'am-title', text: 'Active Memory' }),
    // Off, the API still reports the shared session's state; showing it beside "Off" contradicted it.
    am.enabled ? null : h('p', { class: 'muted am-off' }, badge('Off', 'off'), ' Chat and scheduled runs do not share a session. Turn it on in Edit.'),
    am.enabled ? h('dl', { class: 'facts' },
      h('dt', { text: 'Status' }), h('dd', {}, badge(am.status === 'fresh' ? 'Fresh' : 'Carrying context', am.warning ? 'warn' : am.status)),
      h('dt', { text: 'Runs since reset' }), h('dd', {}, h('span', { class: 'runs-since-reset', text: String(am.runsSinceReset) }),
        h('span', { class: 'muted small-text', text: ' scheduled and manual runs only; chat turns are not counted (the Runs page lists every run)' })),
      h('dt', { text: 'Session age' }), h('dd', { class: 'session-age', text: am.contextStartedAt ? `${fmtAge(am.sessionAgeSeconds)} (carrying context since ${fmtTime(am.contextStartedAt)})` : '— (fresh)' }),
      h('dt', { text: 'Last active' }), h('dd', { class: 'last-active', text: am.lastActiveAt ? `${fmtAge(am.lastActiveSeconds)} ago` : 'never' }),
      h('dt', { text: 'Last reset' }), h('dd', { text: am.lastResetAt ? fmtTime(am.lastResetAt) : 'never' })) : null,
    am.warning ? h('div', { class: 'warning', role: 'alert', text: am.warning }) : null,
    am.enabled ? reset : null);
}

async function sessionList(section, agent) {
  const page = await get(`/api/agents/${id(agent.id)}/sessions`);
  clear(section, h('h2', { text: 'Sessions' }),
    table([
      { label: 'Session', cell: (s) => h('a', { href: `#/agents/${id(agent.id)}/chat/${id(s.id)}` }, s.title || s.id) },
      { label: 'Messages', cell: (s) => String(s.messageCount) },
      { label: 'Updated', cell: (s) => fmtTime(s.updatedAt) },
    ], page.items, { empty: 'No sessions yet.' }),
    page.nextToken ? h('a', { href: `#/agents/${id(agent.id)}/chat` }, 'All sessions…') : null);
}
