// Tool calls waiting for the owner's approval (TL10): a pending call as a card (tool, connection,
// input pretty-printed, when it expires) with a note and Approve / Deny, used by the chat and by a
// run's page. What waits (the navigation's count, the agents list's marks) is waiting.js, small
// enough for the first load.
import { get, post, id } from './api.js';
import { h, clear, busy, errorBox, fmtTime, pretty, stylesheet } from './ui.js';
import { changed, held } from './waiting.js';

await stylesheet('insight.css');

export { changed, held };

// A run's calls still waiting, asked again when the list did not carry them.
export async function pendingOf(run) {
  if (run.pendingApprovals) return held(run);
  return held(await get(`/api/runs/${id(run.id)}`));
}

// Waits `ms`, or less when what waits changes (a card shown or decided on this page): resolves
// true when that woke it. Followers of a waiting run sleep long (it may wait a day) and still
// see a decision made here at once.
export const WAITING_POLL_MS = 15_000;
export function nap(ms) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => done(false), ms);
    function woken() { done(true); }
    function done(byEvent) {
      clearTimeout(timer);
      window.removeEventListener('engram:approvals', woken);
      resolve(byEvent);
    }
    window.addEventListener('engram:approvals', woken);
  });
}

// An MCP tool is named mcp__<connection>__<tool> to the model; Engram's own and the server tools
// have plain names.
export function toolParts(approval) {
  const found = /^mcp__(.+?)__(.+)$/.exec(String(approval.name || ''));
  if (approval.connection) return { connection: approval.connection, tool: approval.tool || (found ? found[2] : approval.name) };
  return found ? { connection: found[1], tool: found[2] } : { connection: null, tool: approval.name };
}

function expiry(approval) {
  if (!approval.expiresAt) return null;
  const left = new Date(approval.expiresAt).getTime() - Date.now();
  const words = left <= 0 ? 'expired (denied)' : `expires ${fmtTime(approval.expiresAt)}`;
  return h('span', { class: 'approval-expiry muted', text: ` · ${words}` });
}

let counter = 0;

// One pending call. `onDecided(decision, answer)` runs after the API accepted the decision.
export function approvalCard(runId, approval, { onDecided = () => {} } = {}) {
  const { connection, tool } = toolParts(approval);
  const noteId = `approval-note-${(counter += 1)}`;
  const note = h('textarea', { id: noteId, name: 'note', rows: 2, maxlength: 2000, placeholder: 'Why (optional; the agent sees it when you deny)' });
  const status = h('div', { class: 'approval-status', role: 'status' });
  const approve = h('button', { type: 'button', class: 'approve' }, 'Approve');
  const deny = h('button', { type: 'button', class: 'danger deny' }, 'Deny');
  const titleId = `${noteId}-title`;
  const card = h('section', { class: 'approval card', 'aria-labelledby': titleId, dataset: { toolUseId: approval.toolUseId, runId } },
    h('h3', { id: titleId, class: 'approval-title' }, 'Waiting for your approval: ', h('span', { class: 'tool-name', text: tool })),
    h('div', { class: 'muted approval-meta' },
      connection ? ['on ', h('strong', { class: 'approval-connection', text: connection })] : 'an Engram tool',
      approval.requestedAt ? ` · asked ${fmtTime(approval.requestedAt)}` : null, expiry(approval)),
    h('div', { class: 'label', text: 'Input' }), h('pre', { class: 'approval-input', text: pretty(approval.input ?? {}) }),
    h('label', { for: noteId, text: 'Note (optional)' }), note,
    h('div', { class: 'actions' }, approve, deny), status);
  const decide = (decision, button) => busy(button, async () => {
    const body = { toolUseId: approval.toolUseId, decision };
    if (note.value.trim()) body.note = note.value.trim();
    let answer;
    try {
      answer = await post(`/api/runs/${id(runId)}/approvals`, body);
    } catch (err) {
      clear(status, errorBox(err));
      return;
    }
    approve.remove();
    deny.remove();
    note.disabled = true;
    card.classList.add(decision === 'approve' ? 'approved' : 'denied');
    card.querySelector('.approval-title').firstChild.textContent = decision === 'approve' ? 'Approved: ' : 'Denied: ';
    clear(status, h('strong', { text: decision === 'approve' ? 'Approved' : 'Denied' }),
      decision === 'approve' ? ': the tool runs and the turn goes on.' : ': the agent is told, and the turn goes on.');
    changed();
    await onDecided(decision, answer);
  });
  approve.addEventListener('click', () => decide('approve', approve));
  deny.addEventListener('click', () => decide('deny', deny));
  changed(); // a call now waits: the count in the navigation says so
  return card;
}

// A decided call (from the socket's approval.decided, or the run's record).
export function decidedLine(event) {
  const { tool } = toolParts(event);
  const word = event.decision === 'approve' ? 'approved' : event.decision === 'deny' ? 'denied' : (event.decision || 'decided');
  const who = event.decidedBy === 'expired' ? ' (nobody decided in time)' : event.decidedBy ? ` by ${event.decidedBy}` : '';
  return h('div', { class: `approval-decided ${word}`, role: 'status' },
    h('span', { class: 'tool-name', text: tool }), ` ${word}${who}${event.decidedAt ? ` ${fmtTime(event.decidedAt)}` : ''}${event.note ? `: “${event.note}”` : ''}`);
}
