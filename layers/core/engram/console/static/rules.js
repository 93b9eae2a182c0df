// The agent form's rules (TL10): which tool calls wait for the owner's approval (per tool server:
// none, every tool, or the tools named; and Engram's own tools), how long a call waits before it
// counts as denied, the spending limits, and whether run timelines keep tool inputs and results. Each control is named as the API names its field
// ("limits.dailyCostUsd", "tools.0.requireApproval"), so a validation error lands beside it.
import { h, stylesheet } from './ui.js';
import { field } from './forms.js';

await stylesheet('insight.css');

// Engram's own tools that change something (the Anthropic server tools, web_search and web_fetch,
// run inside the model's call, where no call can be held, so they are not offered).
export const OWN_TOOLS = [
  ['memory_store', 'memory_store (save a memory)'],
  ['memory_forget', 'memory_forget (archive a memory)'],
  ['remember', 'remember (save a fact about you)'],
  ['forget', 'forget (archive a fact about you)'],
  ['memory_write', 'memory_write (publish to the run memory)'],
  ['store_learning', 'store_learning (a council lead\u2019s lesson)'],
];

// Under a tool server in the picker: whether its calls wait for approval (none, every tool, or
// the tools named). The labels do not repeat the server's or its tools' names: those label the
// grant's own boxes above.
export function approvalControl(connection, toolNames, grant) {
  const rule = grant ? grant.requireApproval : undefined;
  const mode = rule === true ? 'all' : Array.isArray(rule) && rule.length ? 'some' : '';
  const select = h('select', { name: `approval-${connection.id}`, class: 'approval-mode' },
    h('option', { value: '' }, 'No: its calls run at once'),
    h('option', { value: 'all' }, 'Every call of this server'),
    h('option', { value: 'some' }, 'Calls of the tools named below'));
  select.value = mode;
  const names = h('input', { class: 'approval-names', name: `approval-names-${connection.id}`, value: Array.isArray(rule) ? rule.join(', ') : '', spellcheck: 'false' });
  const picks = field('Tools that wait (comma-separated)', names, toolNames.length ? `Its tools: ${toolNames.join(', ')}` : 'Its tools are listed on its first use.');
  picks.classList.add('approval-picks');
  picks.hidden = mode !== 'some';
  select.addEventListener('change', () => { picks.hidden = select.value !== 'some'; });
  return h('div', { class: 'approval-rule' }, field('Needs your approval', select), picks);
}

// The grant's requireApproval as the API takes it, or undefined for none.
export function approvalOf(row) {
  const select = row.querySelector('.approval-mode');
  if (!select || !select.value) return undefined;
  if (select.value === 'all') return true;
  const names = row.querySelector('.approval-names').value.split(',').map((n) => n.trim()).filter(Boolean);
  return names.length ? names : undefined;
}

// Names a chosen server's controls by its place in the body's `tools` (for the API's errors).
export function nameGrant(row, index) {
  const select = row.querySelector('.approval-mode');
  if (select) select.name = `tools.${index}.requireApproval`;
  row.querySelector('.connection-box').name = `tools.${index}`;
}

const number = (name, value, attrs) => h('input', { type: 'number', name, value: value ?? '', min: 0, inputmode: 'decimal', ...attrs });

// Engram's own tools that wait for approval, the wait before a call counts as denied, the limits.
export function rulesFieldset(agent) {
  const a = agent || {};
  const own = new Set(Array.isArray(a.requireApproval) ? a.requireApproval : []);
  const limits = a.limits || {};
  const ownBox = h('fieldset', { class: 'own-approvals', name: 'requireApproval' },
    h('legend', { text: 'Engram\u2019s own tools that wait for your approval' }),
    OWN_TOOLS.map(([value, label]) => {
      const box = h('input', { type: 'checkbox', value, checked: own.has(value), id: `own-approve-${value}`, class: 'own-approval' });
      return h('div', { class: 'check' }, box, h('label', { for: `own-approve-${value}`, text: label }));
    }));
  const hours = a.approvalTimeoutS ? String(Math.round((a.approvalTimeoutS / 3600) * 100) / 100) : '';
  return h('fieldset', { class: 'rules' }, h('legend', { text: 'Approval and limits' }),
    h('div', { class: 'field' }, ownBox, h('div', { class: 'field-error', role: 'alert' })),
    field('Approval waits at most (hours)', number('approvalTimeoutS', hours, { step: 'any', placeholder: '24' }),
      'A call nobody decides in time is denied. Empty: the default (24 hours).'),
    h('div', { class: 'limit-fields' },
      field('Daily cost limit (USD)', number('limits.dailyCostUsd', limits.dailyCostUsd, { step: 'any', placeholder: 'no limit' })),
      field('Monthly cost limit (USD)', number('limits.monthlyCostUsd', limits.monthlyCostUsd, { step: 'any', placeholder: 'no limit' })),
      field('Tool calls per turn', number('limits.toolCallsPerTurn', limits.toolCallsPerTurn, { step: 1, inputmode: 'numeric', placeholder: 'no limit' }))),
    h('p', { class: 'hint muted', text: 'A turn that would pass a limit stops with “limit exceeded” and says which; scheduled runs over it are skipped.' }),
    field('Keep tool inputs and results in run timelines', h('input', { type: 'checkbox', name: 'traceContent', checked: Boolean(a.traceContent) })));
}

const LIMITS = ['dailyCostUsd', 'monthlyCostUsd', 'toolCallsPerTurn'];

// What the rules add to the agent's body. A field the agent never had and the person left empty is
// left out (the API need not know it); one that was set and is now empty is cleared.
export function readRules(form, agent) {
  const a = agent || {};
  const out = {};
  const own = [...form.querySelectorAll('.own-approval:checked')].map((b) => b.value);
  if (own.length || (Array.isArray(a.requireApproval) && a.requireApproval.length)) out.requireApproval = own;
  const hours = form.elements.approvalTimeoutS.value.trim();
  if (hours) out.approvalTimeoutS = Number.isFinite(Number(hours)) ? Math.round(Number(hours) * 3600) : hours;
  else if (a.approvalTimeoutS) out.approvalTimeoutS = null;
  const limits = {};
  for (const key of LIMITS) {
    const raw = form.elements[`limits.${key}`].value.trim();
    if (raw) limits[key] = Number.isFinite(Number(raw)) ? Number(raw) : raw; // the API names what is wrong
  }
  if (Object.keys(limits).length || (a.limits && Object.keys(a.limits).length)) out.limits = limits;
  const content = form.elements.traceContent.checked;
  if (content || a.traceContent !== undefined) out.traceContent = content;
  return out;
}

// The rules in words, for the agent's page.
export function rulesInWords(agent) {
  const own = Array.isArray(agent.requireApproval) && agent.requireApproval.length ? agent.requireApproval.join(', ') : null;
  const l = agent.limits || {};
  const limits = [
    l.dailyCostUsd !== undefined && l.dailyCostUsd !== null ? `$${l.dailyCostUsd} a day` : null,
    l.monthlyCostUsd !== undefined && l.monthlyCostUsd !== null ? `$${l.monthlyCostUsd} a month` : null,
    l.toolCallsPerTurn !== undefined && l.toolCallsPerTurn !== null ? `${l.toolCallsPerTurn} tool calls a turn` : null,
  ].filter(Boolean);
  return {
    approvals: own ? `Engram tools: ${own}${agent.approvalTimeoutS ? ` · waits ${Math.round(agent.approvalTimeoutS / 360) / 10} h` : ''}` : null,
    limits: limits.length ? limits.join(' · ') : null,
  };
}
