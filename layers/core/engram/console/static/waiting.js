// What waits for the owner's approval (TL10): the runs of GET /api/runs?status=awaiting_approval,
// read once per few seconds for the navigation's count and the agents list's marks (the first
// load's only part of approvals; the cards are approvals.js).
import { get, id } from './api.js';

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
