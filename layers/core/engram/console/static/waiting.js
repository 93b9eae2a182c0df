// What waits for the owner's approval (TL10): the runs of GET /api/runs?status=awaiting_approval,
// read once per few seconds for the navigation's count and the agents list's marks (the first
// load's only part of approvals; the cards, and the followers' pendingOf and nap, are approvals.js).
import { get } from './api.js';

// The runs waiting for a decision: one page of the runs search (the API reads at most 2000 runs
// for it, so a person with many runs costs one bounded read, not a walk through all of them), kept
// for 30 s so the navigation and the agents list share it; a card shown or decided reads it again.
// `more`: the search stopped before it had seen every run.
const FRESH_MS = 30_000;
let cached = null;
export function waiting({ fresh = false } = {}) {
  if (fresh || !cached || Date.now() - cached.at > FRESH_MS) {
    const runs = get('/api/runs', { status: 'awaiting_approval', limit: 100 })
      .then((page) => Object.assign(page.items, { more: Boolean(page.nextToken) }))
      .catch(() => Object.assign([], { more: false }));
    cached = { at: Date.now(), runs };
  }
  return cached.runs;
}

export function forget() {
  cached = null;
}

// What waits changed (a call held, a decision made): the navigation counts again, once for
// the changes of one moment.
let announced = false;
export function changed() {
  forget();
  if (announced) return;
  announced = true;
  setTimeout(() => { announced = false; window.dispatchEvent(new Event('engram:approvals')); }, 0);
}

// The calls of a run still waiting (its record keeps the decided ones too, with their decision).
export const held = (run) => (run.pendingApprovals || []).filter((a) => !a.decision);
// How many calls a waiting run holds (at least one: a list may leave them out).
export const heldCount = (run) => Math.max(1, held(run).length);

// Per agent: how many calls wait (a run may hold several).
export async function waitingByAgent() {
  const counts = new Map();
  for (const run of await waiting()) counts.set(run.agentId, (counts.get(run.agentId) || 0) + heldCount(run));
  return counts;
}
