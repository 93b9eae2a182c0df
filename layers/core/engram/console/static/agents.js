// Agents: the list, with each agent's Active Memory pill and its calls waiting for approval. The
// console's first page, so it holds the list only: create, edit and the agent page are agent.js.
import { get, post, id } from './api.js';
import { h, clear, moreButton, busy, badge, errorTitle } from './ui.js';
import { waitingByAgent } from './waiting.js';

export async function list(main) {
  const rows = h('div', { class: 'agent-cards', 'aria-busy': 'true' }, h('p', { class: 'loading', text: 'Loading agents…' }));
  const more = h('div');
  clear(main,
    h('div', { class: 'page-head' }, h('h1', { text: 'Agents' }), h('a', { href: '#/agents/new', class: 'button' }, 'New agent')),
    rows, more);
  const waiting = waitingByAgent();
  const load = async (nextToken) => {
    const page = await get('/api/agents', { nextToken });
    if (!nextToken) { rows.replaceChildren(); rows.removeAttribute('aria-busy'); }
    if (!page.items.length && !nextToken) rows.append(h('p', { class: 'empty', text: 'No agents yet. Create one to start chatting.' }));
    for (const agent of page.items) rows.append(agentCard(agent, waiting));
    clear(more, moreButton(page.nextToken, load));
  };
  await load();
}

// An agent with tool calls waiting for the owner's approval says so on its card, with a link to them.
async function markWaiting(agent, waiting, slot) {
  const n = (await waiting).get(agent.id) || 0;
  if (!n) return;
  clear(slot, h('a', { class: 'badge badge-awaiting_approval waiting-mark', href: `#/runs?status=awaiting_approval&agentId=${id(agent.id)}` },
    `${n} waiting for approval`));
}

function agentCard(agent, waiting) {
  const pill = h('span', { class: 'pill-slot' });
  const mark = h('span', { class: 'waiting-slot' });
  const card = h('article', { class: 'card agent-card', dataset: { agentId: agent.id } },
    h('h2', {}, h('a', { href: `#/agents/${id(agent.id)}` }, agent.name)),
    h('p', { class: 'muted persona', text: agent.persona ? agent.persona.slice(0, 140) : 'No persona' }),
    h('div', { class: 'tags' },
      agent.schedule ? badge(`every: ${agent.schedule}`, 'schedule') : null,
      agent.team && agent.team.length ? badge(`council of ${agent.team.length}`, 'council') : null,
      agent.cardType ? badge(`card: ${agent.cardType}`, 'card') : null,
      pill, mark),
    h('div', { class: 'actions' },
      h('a', { href: `#/agents/${id(agent.id)}/chat`, class: 'button' }, 'Chat'),
      h('a', { href: `#/agents/${id(agent.id)}/runs`, class: 'button secondary' }, 'Runs'),
      h('a', { href: `#/memory/agent/${id(agent.id)}`, class: 'button secondary' }, 'Memory')));
  if (agent.activeMemory) fillPill(agent, pill);
  if (waiting) markWaiting(agent, waiting, mark);
  return card;
}

// The Active Memory pill on a card: amber past the warning threshold, with Reset at hand.
async function fillPill(agent, slot) {
  try {
    const am = await get(`/api/agents/${id(agent.id)}/active-memory`);
    if (!am.enabled) {
      clear(slot);
      return;
    }
    const text = `${am.status === 'fresh' ? 'Fresh' : 'Carrying context'} · ${am.runsSinceReset} runs`;
    clear(slot, badge(text, am.warning ? 'warn' : 'memory'));
    if (am.warning) {
      const reset = h('button', { type: 'button', class: 'small' }, 'Reset memory');
      reset.addEventListener('click', () => busy(reset, async () => {
        await post(`/api/agents/${id(agent.id)}/active-memory/reset`);
        await fillPill(agent, slot);
      }));
      slot.append(' ', reset);
    }
  } catch (err) {
    clear(slot, badge(`memory: ${errorTitle(err.code).toLowerCase()}`, 'error'));
  }
}
