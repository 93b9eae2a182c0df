// Chat: the session picker (dashboard first), the transcript with tool calls and their results as
// collapsible blocks beside the text, sync turns with a progress indicator and the turn's usage,
// and async (queued) turns shown until their run finishes. Above the transcript, "N earlier
// messages" with the session's running summary when the history cap has cut some (CM8), and a
// search over everything said to this agent (the archive: what the cap cut included).
// With the WebSocket API (stream.js) a
// turn streams: its text and tool blocks appear as they happen, and turns that others start on
// the session (queued turns, webhooks, heartbeats) arrive live; without it, turns go over HTTP.
// A socket that closes is opened again with backoff and each live turn resumed after the last
// event shown (ST5); a turn sent but not yet accepted is sent again with its clientTurnId (the
// same run). When the socket cannot be opened again, each live turn says it is still running,
// links to its run and is followed over HTTP; a message the socket refused goes back in the box.
import { get, post, del, all, id } from './api.js';
import { openStream, turnId } from './stream.js';
import { markdownView, renderMarkdown } from './markdown.js';
import { approvalCard, decidedLine, pendingOf, held, changed, nap, WAITING_POLL_MS } from './approvals.js';
import {
  h, clear, busy, errorBox, errorTitle, fmtCost, fmtNum, fmtTime, pretty, showError, badge, moreButton,
} from './ui.js';
import { confirmAction, dialog, field } from './forms.js';

const POLL_MS = 1500;
// A live turn with no event for this long: one GET of the session, to see whether it committed
// (its turn.completed may have been lost; events are best-effort).
const QUIET_MS = 10_000;
const RECONNECT_MS = [500, 1000, 2000, 4000, 8000, 15000];
const LIVE_HELP = 'Live: the reply streams in as the agent writes it, and turns started elsewhere (queued turns, webhooks, heartbeats) show up here as they run. HTTP: no live connection; a reply shows when its turn has finished.';
const ASYNC_HELP = 'Queue it (async): the turn runs in the background as a run; you can leave the page, and the reply shows here when the run is done.';

export async function chat(main, agentId, sessionId = 'dashboard') {
  const agent = await get(`/api/agents/${id(agentId)}`);
  const picker = h('nav', { class: 'sessions', 'aria-label': 'Sessions' });
  const transcript = h('div', { class: 'transcript', role: 'log', 'aria-live': 'polite' });
  const pending = h('div', { class: 'pending' });
  const usage = h('div', { class: 'turn-usage', 'aria-live': 'polite' });
  const errors = h('div', { class: 'chat-error' });
  const box = h('textarea', { id: 'chat-input', name: 'message', rows: 3, placeholder: 'Message (Enter sends, Shift+Enter for a new line)' });
  const asyncBox = h('input', { type: 'checkbox', id: 'chat-async' });
  const send = h('button', { type: 'submit' }, 'Send');
  const search = archiveSearch(agent);
  const liveBadge = h('span', { class: 'live-badge muted', role: 'status', text: 'HTTP', tabindex: '0', 'aria-describedby': 'live-badge-help', title: LIVE_HELP });
  asyncBox.setAttribute('aria-describedby', 'chat-async-help');
  const composer = h('form', { class: 'composer' },
    h('label', { for: 'chat-input', class: 'visually-hidden', text: 'Message' }), box,
    h('div', { class: 'composer-row' },
      h('div', { class: 'check' }, asyncBox, h('label', { for: 'chat-async', text: 'Queue it (async)' })),
      send),
    h('p', { id: 'chat-async-help', class: 'muted small-text', text: ASYNC_HELP }),
    h('p', { id: 'live-badge-help', class: 'visually-hidden', text: LIVE_HELP }));

  const chatMain = h('section', { class: 'chat-main', 'aria-label': 'Conversation' }, search, errors, transcript, pending, usage, composer);
  clear(main,
    h('div', { class: 'page-head' },
      h('h1', {}, h('a', { href: `#/agents/${id(agent.id)}` }, agent.name), ' · chat ', liveBadge),
      h('a', { href: `#/agents/${id(agent.id)}/runs`, class: 'button secondary' }, 'Runs')),
    h('div', { class: 'chat' },
      picker,
      chatMain));

  // Live turns over the socket: one view per run, filled in as its events arrive.
  const live = new Map();
  let loads = 0;
  // The session's runs, to link each reply to its run: the newest read with the first load, then
  // each turn this page sees end added as it ends (a reload after a turn costs no runs request).
  const runsSeen = [];
  let runsRead = false;
  const noteRun = (runId, prompt) => {
    if (runId && !runsSeen.some((r) => r.id === runId)) runsSeen.unshift({ id: runId, sessionId, status: 'succeeded', prompt, createdAt: new Date().toISOString() });
  };
  const reload = async (ended) => {
    const mine = ++loads; // reloads may overlap (a turn ends as the page loads): the newest one shows
    if (ended && ended.status === 'succeeded') noteRun(ended.id, ended.prompt);
    try {
      const session = await get(`/api/agents/${id(agent.id)}/sessions/${id(sessionId)}`);
      const known = await callDetails(agent, toolUseIds(session.messages || []), runsRead ? null : runsSeen);
      runsRead = true;
      const gone = await endedBy(session.lastRunId);
      if (mine !== loads) return;
      drop(gone);
      renderTranscript(transcript, session.messages || [], session, known, turnRuns(session.messages || [], runsSeen.filter((r) => r.sessionId === sessionId)));
      for (const view of new Set(live.values())) transcript.append(view.root); // turns still running stay below
      // On a phone the page scrolls, not the transcript: after the newest message, the box to answer it.
      composer.scrollIntoView({ block: 'nearest' });
    } catch (err) {
      if (err.status === 404 && sessionId === 'dashboard') renderTranscript(transcript, []);
      else clear(transcript, errorBox(err));
    }
  };

  let stream = null;
  // Events are best-effort (a push may be throttled away): the run is also followed over HTTP,
  // and whichever sees it end first shows the transcript.
  // A turn ends once for the page: by its stream event or by the HTTP follow, whichever is first;
  // the other finds it settled, so a streamed turn reloads the data once, not twice.
  const settled = new Set();
  const settle = async (runId) => {
    if (settled.has(runId)) return;
    settled.add(runId);
    await reload();
    await renderPicker(picker, agent, sessionId);
  };
  // A message refused because a turn of this session waits for approval (409 approval_pending,
  // naming the run, e.g. a heartbeat on the shared session): that turn's calls, to decide here.
  const showWaiting = async (err) => {
    if (!err || err.code !== 'approval_pending' || !err.runId) return;
    try {
      const run = await get(`/api/runs/${id(err.runId)}`);
      if (run.status === 'awaiting_approval') track(run.id, run.status, pending, resumedEnded, { ...run, pendingApprovals: held(run) });
    } catch {
      // the error above says which run; its page has the calls
    }
  };
  // A paused turn that ended: the transcript, the picker's counts and what waits, all read again.
  const resumedEnded = async (ended) => {
    await reload(ended);
    await renderPicker(picker, agent, sessionId);
    changed();
  };
  const finished = (runId) => async (ended) => {
    const view = live.get(runId);
    if (view) { view.root.remove(); live.delete(runId); }
    if (ended && ended.status === 'succeeded') noteRun(ended.id, ended.prompt);
    await settle(runId);
  };
  // A queued run followed over HTTP ended: its live view (if the socket showed it) goes with it,
  // whether or not the socket's turn.completed arrives (a push may be late or lost); the
  // transcript then holds its reply, shown once.
  const queuedEnded = (ended) => finished(ended.id)(ended);
  // The transcript reflects the commit of `lastRunId` (a run's success and its transcript are one
  // write; its turn.completed is pushed after, best-effort): that run's live view goes, its reply
  // shown once by the transcript, and its later events are ignored. A live view of an earlier run
  // (run ids are time-ordered) has most likely ended with its end lost, but a queued turn a later
  // one overtook, or a turn paused for approval, may still be running: its run is asked, and the
  // view goes if the run has ended. Returns the runs that ended: id -> the run (null: committed).
  const endedBy = async (lastRunId) => {
    const gone = new Map();
    if (!lastRunId) return gone;
    gone.set(lastRunId, null);
    const earlier = new Set([...live.values()].map((v) => v.runId).filter((runId) => runId && runId < lastRunId));
    await Promise.all([...earlier].map(async (runId) => {
      try {
        const run = await get(`/api/runs/${id(runId)}`);
        if (run.status === 'succeeded' || run.status === 'failed') gone.set(runId, run);
      } catch {
        // kept: the next load asks again
      }
    }));
    return gone;
  };
  const drop = (gone) => {
    for (const runId of gone.keys()) settled.add(runId);
    for (const [key, view] of [...live.entries()]) {
      if (!view.runId || !gone.has(view.runId)) continue;
      view.root.remove();
      live.delete(key);
      const run = gone.get(view.runId);
      if (!run || run.status === 'succeeded') noteRun(view.runId, view.message);
      else clear(errors, errorBox({ code: run.error?.code || 'failed', message: `${run.error?.message || 'the turn failed'} (run ${run.id})` }));
    }
  };
  // A live view with no event for QUIET_MS: one session GET; if it shows the run committed, the
  // transcript is loaded (and the view goes). Each event puts the check off again.
  let quiet = null;
  const armQuiet = () => {
    clearTimeout(quiet);
    quiet = setTimeout(async () => {
      const waiting = [...live.values()].filter((v) => v.runId && !v.paused);
      if (!transcript.isConnected || !waiting.length) return;
      try {
        const session = await get(`/api/agents/${id(agent.id)}/sessions/${id(sessionId)}`);
        if (session.lastRunId && waiting.some((v) => v.runId <= session.lastRunId)) {
          await reload();
          await renderPicker(picker, agent, sessionId);
        }
      } catch {
        // the next event or check tries again
      }
      if (live.size) armQuiet();
    }, QUIET_MS);
  };
  const onEvent = (event) => {
    handle(event);
    if (transcript.isConnected && live.size) armQuiet();
  };
  const handle = (event) => {
    if (!transcript.isConnected) { if (stream) stream.close(); return; }
    // A run the page already saw end (or committed in the transcript): its late events show nothing.
    if (event.runId && settled.has(event.runId) && event.type !== 'turn.completed' && event.type !== 'turn.failed') return;
    if (event.type === 'error') {
      const view = live.get(event.clientTurnId);
      if (view) {
        view.root.remove();
        live.delete(event.clientTurnId);
        if (!box.value.trim()) box.value = view.message; // refused: the message stays to send again
      }
      clear(errors, errorBox({ code: event.error.code, message: event.error.message }));
      showWaiting(event.error);
      return;
    }
    if (event.type === 'resumed' || event.type === 'turn.keepalive') return;
    if (event.type === 'subscribed' && event.sessionId === sessionId) {
      liveBadge.textContent = 'Live'; // from now on every turn of this session arrives here
      liveBadge.className = 'live-badge on';
      return;
    }
    if (event.type === 'turn.queued') {
      const view = live.get(event.clientTurnId);
      if (view) { live.delete(event.clientTurnId); live.set(event.runId, view); view.runId = event.runId; }
      if (!following.has(event.runId)) { following.add(event.runId); follow(event.runId, pending, finished(event.runId), () => settled.has(event.runId)); }
      return;
    }
    if (!event.runId || (event.sessionId && event.sessionId !== sessionId)) return;
    const seen = live.get(event.runId);
    if (seen && typeof event.seq === 'number') {
      if (event.seq <= seen.lastSeq) return; // replayed and live: shown once
      seen.lastSeq = event.seq;
    }
    if (event.type === 'approval.requested' || event.type === 'approval.decided') {
      const paused = live.get(event.runId);
      if (event.type === 'approval.decided') {
        if (paused) paused.decided(event);
        return;
      }
      const approvals = event.pendingApprovals || [event.approval || event];
      if (paused) paused.awaiting(event.runId, approvals, chatMain);
      else track(event.runId, 'awaiting_approval', pending, resumedEnded, { prompt: event.message || '', pendingApprovals: approvals });
      transcript.scrollTop = transcript.scrollHeight; // the card and its buttons in view
      chatMain.querySelector('.approval:last-of-type')?.scrollIntoView({ block: 'nearest' });
      return;
    }
    if (event.type === 'turn.completed' || event.type === 'turn.failed') {
      const done = live.get(event.runId);
      if (event.type === 'turn.completed' && done) noteRun(event.runId, done.message);
      if (done) { live.delete(event.runId); done.root.remove(); if (done.root.querySelector('.approval')) changed(); }
      if (event.type === 'turn.completed') clear(usage, usageView(event.usage, Date.now() - (done ? done.started : Date.now())));
      else clear(errors, errorBox({ code: event.error.code, message: `${event.error.message} (run ${event.runId})`, limit: event.error.limit }));
      settle(event.runId);
      return;
    }
    let view = live.get(event.runId);
    if (!view && event.type === 'turn.started' && live.has(event.clientTurnId)) {
      view = live.get(event.clientTurnId); // our own turn, started before its answer arrived
      live.delete(event.clientTurnId);
      live.set(event.runId, view);
      view.runId = event.runId;
    }
    if (!view && event.type === 'turn.started' && !settled.has(event.runId)) { // a late start of a run already ended: not shown again
      view = liveView(event);
      view.runId = event.runId;
      live.set(event.runId, view);
      transcript.append(view.root);
    }
    if (view && typeof event.seq === 'number') view.lastSeq = Math.max(view.lastSeq, event.seq);
    if (!view) return;
    view.apply(event);
    transcript.scrollTop = transcript.scrollHeight;
  };

  const sendLive = (message) => {
    const clientTurnId = turnId();
    const view = liveView({ message, kind: 'chat', own: true });
    view.clientTurnId = clientTurnId;
    live.set(clientTurnId, view);
    transcript.append(view.root);
    transcript.scrollTop = transcript.scrollHeight;
    stream.send({ action: 'turn', agentId: agent.id, sessionId, message, clientTurnId });
    box.value = '';
  };

  // The socket closed: open another with backoff, watch the session again, resume each live turn
  // after its last event and send again the turns not yet accepted (their clientTurnId makes them
  // the same run). If it cannot be opened, no spinner is left turning.
  const following = new Set();
  const reconnect = async () => {
    for (const wait of RECONNECT_MS) {
      await new Promise((resolve) => setTimeout(resolve, wait));
      if (!transcript.isConnected) return;
      stream = await openStream(onEvent, onClosed);
      if (stream) {
        stream.send({ action: 'subscribe', agentId: agent.id, sessionId });
        for (const view of new Set(live.values())) {
          if (view.runId) stream.send({ action: 'resume', runId: view.runId, afterSeq: view.lastSeq });
          else if (view.clientTurnId) stream.send({ action: 'turn', agentId: agent.id, sessionId, message: view.message, clientTurnId: view.clientTurnId });
        }
        return;
      }
    }
    liveBadge.textContent = 'HTTP';
    liveBadge.className = 'live-badge muted';
    for (const [key, view] of [...live.entries()]) {
      if (view.runId) {
        view.stillRunning(view.runId);
        if (!following.has(view.runId)) { following.add(view.runId); follow(view.runId, pending, finished(view.runId)); }
      } else { // never accepted: nothing runs, the message goes back in the box
        view.root.remove();
        live.delete(key);
        if (!box.value.trim()) box.value = view.message;
        clear(errors, errorBox({ code: 'connection_closed', message: 'the connection closed before the turn was accepted; send it again' }));
      }
    }
  };
  const onClosed = () => {
    stream = null;
    liveBadge.textContent = 'Reconnecting…';
    liveBadge.className = 'live-badge muted';
    if (transcript.isConnected && !leaving) reconnect();
  };
  let leaving = false;

  // The box to answer gets the focus when a load or a turn ends, unless the person is typing
  // elsewhere by then (the archive search): the text they type must not land in the message.
  const focusBox = () => {
    const at = document.activeElement;
    const typing = at && at.matches('input, textarea, select, [contenteditable]') && !composer.contains(at);
    if (!typing) box.focus();
  };
  const submit = async () => {
    const message = box.value.trim();
    if (!message) return;
    errors.replaceChildren();
    usage.replaceChildren(); // the last turn's usage belongs to that turn, not to this one
    // A frame over 32 KB closes the socket (API Gateway's limit): a long message goes over HTTP.
    if (stream && stream.open && !asyncBox.checked && new TextEncoder().encode(message).length < 30000) {
      sendLive(message);
      box.focus();
      return;
    }
    send.disabled = true;
    box.disabled = true;
    const started = Date.now();
    const progress = h('div', { class: 'progress', role: 'status' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), h('span', { text: ' The agent is working…' }));
    const tick = setInterval(() => { progress.lastChild.textContent = ` The agent is working… ${Math.round((Date.now() - started) / 1000)} s`; }, 1000);
    const sent = messageView({ role: 'user', content: message }, new Map());
    transcript.append(sent, progress);
    transcript.scrollTop = transcript.scrollHeight;
    let queued = false;
    try {
      const path = `/api/agents/${id(agent.id)}/sessions/${id(sessionId)}/messages`;
      if (asyncBox.checked) {
        const accepted = await post(path, { message }, { async: 'true' });
        box.value = '';
        queued = true;
        track(accepted.runId, 'queued', pending, queuedEnded);
      } else {
        const turn = await post(path, { message });
        box.value = '';
        if (turn.status !== 'awaiting_approval') noteRun(turn.runId, message);
        // 202: the turn paused for the owner's approval; it goes on in the background once decided.
        if (turn.status === 'awaiting_approval') track(turn.runId, turn.status, pending, resumedEnded, { prompt: message, pendingApprovals: turn.pendingApprovals || [] });
        else clear(usage, usageView(turn.usage, Date.now() - started));
      }
    } catch (err) {
      clear(errors, errorBox(err));
      showWaiting(err);
    } finally {
      clearInterval(tick);
      progress.remove();
      send.disabled = false;
      box.disabled = false;
      focusBox();
      // Queued: the transcript is as it was (the run's view below follows it; its end reloads).
      // Read again now, it could already hold the run's reply while the socket's live view of the
      // run, its end not yet pushed, shows the reply too.
      if (queued) sent.remove();
      else await reload();
      renderPicker(picker, agent, sessionId);
    }
  };
  composer.addEventListener('submit', (e) => { e.preventDefault(); submit(); });
  box.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); submit(); }
  });
  // The listeners are in place before the first await: a message typed at once is not lost.
  await Promise.all([renderPicker(picker, agent, sessionId), reload()]);
  watchQueued(agent, sessionId, pending, queuedEnded, resumedEnded);
  focusBox();
  stream = await openStream(onEvent, onClosed);
  if (stream && transcript.isConnected) {
    stream.send({ action: 'subscribe', agentId: agent.id, sessionId });
    liveBadge.textContent = 'Connecting…';
    window.addEventListener('hashchange', () => { leaving = true; if (stream) stream.close(); }, { once: true });
  } else if (stream) {
    leaving = true;
    stream.close();
  }
}

// A turn as it happens: who started it (you, a queued turn, a webhook, a heartbeat), then the
// agent's text and tool blocks as its events arrive. Replaced by the transcript when it ends.
function liveView(start) {
  const who = start.own ? 'You'
    : start.kind === 'heartbeat' ? 'Heartbeat'
      : start.kind === 'manual' ? 'Manual run'
        : start.trigger === 'webhook' ? 'Webhook' : 'Queued turn';
  const asked = h('div', { class: `message user${start.own ? '' : ' arrived'}` },
    h('div', { class: 'role', text: who }), h('div', { class: 'text', text: start.message || '' }));
  const body = h('div', { class: 'live-body' });
  const status = h('span', { class: 'spinner', 'aria-hidden': 'true' });
  const wait = h('span', { class: 'awaiting-words' });
  const answer = h('div', { class: 'message assistant live' }, h('div', { class: 'role' }, 'Agent ', status, wait), body);
  const root = h('div', { class: 'live-turn' }, asked, answer);
  const tools = new Map();
  let text = null;
  let round = -1;
  return {
    root,
    started: Date.now(),
    message: start.message || '',
    lastSeq: 0,
    runId: null,
    clientTurnId: null,
    paused: false,
    awaiting(runId, approvals, page) { // paused: the calls that wait, each with Approve / Deny
      this.paused = true;
      wait.textContent = ' waiting for your approval';
      addApprovalCards(body, runId, approvals, page);
    },
    decided(event) { // a card decided here says so already; one decided elsewhere is replaced
      const card = body.querySelector(`.approval[data-tool-use-id="${CSS.escape(event.toolUseId || '')}"]`);
      if (card && card.querySelector('button.approve')) card.replaceWith(decidedLine(event));
      else if (!card) body.append(decidedLine(event));
      if (!body.querySelector('.approval button.approve')) { wait.textContent = ''; this.paused = false; }
    },
    stillRunning(runId) { // the socket is gone for good: the run page says how it ends
      status.replaceWith(h('span', { class: 'muted' }, ' still running, see ', h('a', { href: `#/runs/${id(runId)}`, text: 'the run' })));
    },
    apply(event) {
      if (event.type === 'turn.started' && !start.own) return;
      if (event.type === 'text.delta') {
        if (!text || event.round !== round) {
          round = event.round;
          text = h('div', { class: 'text' });
          text.raw = '';
          body.append(text);
        }
        text.raw += event.text;
        renderMarkdown(text, text.raw);
      } else if (event.type === 'tool.started') {
        const state = h('span', { class: 'muted', text: ' · running…' });
        const block = h('details', { class: 'tool-call' },
          h('summary', {}, h('span', { class: 'tool-name', text: event.name }), state),
          h('div', { class: 'tool-io' }, h('div', { class: 'label', text: 'Input' }), h('pre', { text: pretty(event.input) })));
        tools.set(event.toolUseId, { block, state });
        body.append(block);
        text = null;
      } else if (event.type === 'tool.finished') {
        const tool = tools.get(event.toolUseId);
        if (tool) {
          tool.state.textContent = `${event.durationMs !== undefined ? ` · ${Math.round(event.durationMs)} ms` : ''} · ${event.isError ? 'error' : 'done'}`;
          if (event.isError) tool.block.classList.add('tool-error');
        }
      } else if (event.type === 'turn.completed' || event.type === 'turn.failed') {
        status.remove();
      }
    },
  };
}

async function renderPicker(picker, agent, current) {
  let sessions;
  try {
    sessions = await all(`/api/agents/${id(agent.id)}/sessions`, {}, 500);
  } catch (err) {
    clear(picker, errorBox(err));
    return;
  }
  if (!sessions.some((s) => s.id === 'dashboard')) sessions.unshift({ id: 'dashboard', title: 'Dashboard', messageCount: 0 });
  sessions.sort((a, b) => (a.id === 'dashboard' ? -1 : b.id === 'dashboard' ? 1 : String(b.updatedAt).localeCompare(String(a.updatedAt))));
  const create = h('button', { type: 'button', class: 'small' }, 'New session');
  create.addEventListener('click', () => newSession(agent, create));
  clear(picker,
    h('div', { class: 'sessions-head' }, h('h2', { text: 'Sessions' }), create),
    h('ul', {}, sessions.map((s) => {
      const remove = h('button', { type: 'button', class: 'icon', 'aria-label': `Delete session ${sessionName(s)}`, title: 'Delete session' }, '×');
      remove.addEventListener('click', async () => {
        if (!(await confirmAction(`Delete the session “${sessionName(s)}” and its transcript?`))) return;
        await busy(remove, async () => {
          await del(`/api/agents/${id(agent.id)}/sessions/${id(s.id)}`);
          if (s.id === current) location.hash = `#/agents/${id(agent.id)}/chat`;
          else renderPicker(picker, agent, current);
        });
      });
      return h('li', { class: s.id === current ? 'current' : '' },
        h('a', { href: `#/agents/${id(agent.id)}/chat/${id(s.id)}`, 'aria-current': s.id === current ? 'page' : null },
          h('span', { class: 'title', text: sessionName(s) }),
          h('span', { class: 'muted count', text: `${s.messageCount || 0} msgs` })),
        s.id === 'dashboard' ? null : remove);
    })));
}

// A session as a person knows it: its title, or when it began (never its id).
function sessionName(s) {
  if (s.id === 'dashboard') return 'Dashboard';
  if (s.title && s.title !== 'Untitled session') return s.title;
  return s.createdAt ? `Untitled · ${fmtTime(s.createdAt)}` : 'Untitled session';
}

async function newSession(agent, button) {
  const title = h('input', { id: 'new-session-title', name: 'title', maxlength: 200 });
  setTimeout(() => title.focus(), 0);
  const ok = await dialog({
    title: 'New session',
    body: [field('Title (optional)', title)],
    actions: [{ label: 'Cancel', value: false }, { label: 'Create', value: true }],
  });
  if (!ok) return;
  await busy(button, async () => {
    const session = await post(`/api/agents/${id(agent.id)}/sessions`, { title: title.value.trim() });
    location.hash = `#/agents/${id(agent.id)}/chat/${id(session.id)}`;
  });
}

// Messages in Anthropic's shapes: a user or assistant message is a string or a list of blocks
// (text, tool_use, tool_result). A tool's result is shown inside its call's block.
// What the run records say of the recent tool calls (connection, duration, bytes, error, whether
// the model got the result cut), by tool_use id; the transcript holds what the model saw.
// Only when the transcript has tool calls, and back through older runs until every call is found
// (a call whose run is older than the newest 50 kept its details too), at most DETAIL_PAGES pages.
// The newest runs also link each reply to its run's timeline (recentRuns, when asked for).
const DETAIL_PAGES = 10;
async function callDetails(agent, wanted, recentRuns = null) {
  const details = new Map();
  let nextToken;
  try {
    for (let pages = 0; (wanted.size || (recentRuns && !pages)) && pages < DETAIL_PAGES; pages += 1) {
      const page = await get(`/api/agents/${id(agent.id)}/runs`, { limit: pages ? 100 : 50, nextToken });
      if (!pages && recentRuns) recentRuns.push(...page.items.filter((r) => !recentRuns.some((seen) => seen.id === r.id)));
      for (const run of page.items) {
        for (const call of run.toolCalls || []) {
          if (call.toolUseId && wanted.has(call.toolUseId)) {
            details.set(call.toolUseId, { ...call, runId: run.id });
            wanted.delete(call.toolUseId);
          }
        }
      }
      nextToken = page.nextToken;
      if (!nextToken) break;
    }
  } catch {
    // the transcript still shows; the blocks just lack their timings
  }
  return details;
}

function toolUseIds(messages) {
  const ids = new Set();
  for (const m of messages) {
    if (Array.isArray(m.content)) for (const block of m.content) if (block.type === 'tool_use') ids.add(block.id);
  }
  return ids;
}

// A turn starts at a message the person (or a run's prompt) sent, not at one of tool results.
const startsTurn = (m) => m.role === 'user' && !(Array.isArray(m.content) && m.content.length && m.content.every((b) => b.type === 'tool_result'));
const textOf = (m) => (typeof m.content === 'string' ? m.content : (m.content || []).filter((b) => b.type === 'text').map((b) => b.text).join('\n'));

// Which run wrote each reply, by the index of the turn's last message: a run's prompt is marked
// on its message (`meta.runId`, heartbeats and manual runs); a chat turn is paired, newest first,
// with the newest finished run of this session that was asked the same words.
function turnRuns(messages, runs) {
  const starts = messages.map((m, i) => (startsTurn(m) ? i : -1)).filter((i) => i >= 0);
  const finished = runs.filter((r) => r.status === 'succeeded').sort((a, b) => String(b.createdAt).localeCompare(String(a.createdAt)));
  const out = new Map();
  let next = 0;
  for (let t = starts.length - 1; t >= 0; t -= 1) {
    const first = messages[starts[t]];
    const last = (t + 1 < starts.length ? starts[t + 1] : messages.length) - 1;
    if (first.meta && first.meta.runId) { out.set(last, first.meta.runId); continue; }
    const asked = textOf(first).trim();
    const k = finished.slice(next).findIndex((r) => String(r.prompt || '').trim() === asked);
    if (k < 0) continue;
    out.set(last, finished[next + k].id);
    next += k + 1;
  }
  return out;
}

function renderTranscript(transcript, messages, session = {}, details = new Map(), runOf = new Map()) {
  const results = new Map();
  for (const m of messages) {
    if (Array.isArray(m.content)) {
      for (const block of m.content) if (block.type === 'tool_result') results.set(block.tool_use_id, block);
    }
  }
  // The reply's link to its run sits under the turn's last message that shows (not one of tool results).
  const linkAt = new Map();
  for (const [last, runId] of runOf) {
    for (let i = last; i >= 0 && !startsTurn(messages[i]); i -= 1) {
      if (messages[i].role === 'assistant' && (typeof messages[i].content === 'string' || messages[i].content.some((b) => b.type === 'text' || b.type === 'tool_use'))) { linkAt.set(i, runId); break; }
    }
  }
  const views = messages.map((m, i) => [
    i === session.contextFrom && i > 0 ? resetMarker(session) : null,
    messageView(m, results, details, linkAt.get(i)),
  ]).flat().filter(Boolean);
  const trimmed = trimMarker(session);
  clear(transcript, trimmed, views.length || trimmed ? views : h('p', { class: 'empty', text: 'No messages yet. Say hello.' }));
  transcript.scrollTop = transcript.scrollHeight;
  showNewest(transcript);
}

// The newest message in view: the transcript scrolls on a wide screen, the page on a phone.
function showNewest(transcript) {
  const last = transcript.lastElementChild;
  if (last && typeof last.scrollIntoView === 'function') last.scrollIntoView({ block: 'nearest' });
}

// An Active Memory reset: the messages above stay on screen, but the agent no longer sees them.
function resetMarker(session) {
  return h('div', { class: 'reset-marker', role: 'note' },
    h('span', { text: `Active Memory reset${session.lastResetAt ? ` · ${fmtTime(session.lastResetAt)}` : ''}` }),
    h('span', { class: 'muted', text: ' · the agent starts fresh here and does not see the messages above' }));
}

// The messages the history cap cut (CM8): how many, and the summary the agent receives of them.
function trimMarker(session) {
  const n = session.trimmedCount || 0;
  if (!n) return null;
  const summary = session.summary;
  return h('details', { class: 'trim-marker', open: '' },
    h('summary', {}, h('strong', { text: `${n} earlier message${n === 1 ? '' : 's'}` }),
      h('span', { class: 'muted', text: ' · cut by the history cap; archived, and summarised for the agent' })),
    summary
      ? [h('div', { class: 'label', text: `Summary (${summary.model === 'offline' ? 'offline summariser' : summary.model}, covers ${summary.coveredCount} of ${n})` }),
        h('div', { class: 'summary-text', text: summary.text })]
      : h('p', { class: 'muted', text: 'The summary is on its way.' }));
}

// Search everything said to and by this agent, in every session (GET .../archive/search).
function archiveSearch(agent) {
  const input = h('input', { type: 'search', id: 'archive-search', name: 'q', maxlength: 500, placeholder: 'Search earlier conversations with this agent' });
  const results = h('div', { class: 'archive-results', 'aria-live': 'polite' });
  const form = h('form', { class: 'archive-search', role: 'search' },
    h('label', { for: 'archive-search', class: 'visually-hidden', text: 'Search earlier conversations' }), input,
    h('button', { type: 'submit', class: 'secondary' }, 'Search'));
  const load = async (q, nextToken) => {
    const page = await get(`/api/agents/${id(agent.id)}/archive/search`, { q, limit: 10, ...(nextToken ? { nextToken } : {}) });
    if (!nextToken) results.replaceChildren();
    results.querySelector('button.more')?.remove();
    if (!page.items.length && !nextToken) results.append(h('p', { class: 'empty', text: `Nothing said matches “${q}”.` }));
    const names = await sessionNames(agent);
    results.append(...page.items.map((hit) => hitView(agent, hit, names)));
    const more = moreButton(page.nextToken, (token) => load(q, token));
    if (more) results.append(more);
  };
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const q = input.value.trim();
    if (!q) { results.replaceChildren(); return; }
    try { await load(q, null); } catch (err) { clear(results, errorBox(err)); }
  });
  return h('div', {}, form, results);
}

// The agent's sessions by id, named as the picker names them (for the archive's results).
async function sessionNames(agent) {
  try {
    return new Map((await all(`/api/agents/${id(agent.id)}/sessions`, {}, 500)).map((s) => [s.id, sessionName(s)]));
  } catch {
    return new Map();
  }
}

function hitView(agent, hit, names) {
  const name = names.get(hit.sessionId) || (hit.sessionId === 'dashboard' ? 'Dashboard' : 'a deleted session');
  const where = names.has(hit.sessionId) || hit.sessionId === 'dashboard'
    ? h('a', { href: `#/agents/${id(agent.id)}/chat/${id(hit.sessionId)}`, class: 'archive-session', text: name })
    : h('span', { text: name });
  return h('article', { class: 'archive-hit' },
    h('div', { class: 'muted' }, `${hit.role === 'user' ? 'You' : 'Agent'} · in `, where, ` · ${fmtTime(hit.createdAt)}`),
    h('div', { class: 'text', text: hit.text }));
}

function messageView(message, results, details = new Map(), runId = null) {
  const blocks = typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : (message.content || []);
  const parts = [];
  for (const block of blocks) {
    if (block.type === 'text' && block.text) parts.push(message.role === 'assistant' ? markdownView(block.text) : h('div', { class: 'text', text: block.text }));
    else if (block.type === 'tool_use') parts.push(toolView(block, results.get(block.id), details.get(block.id)));
  }
  if (!parts.length) return null; // a message of tool results only: shown inside the calls
  const who = message.role === 'user' ? promptLabel(message.meta) : 'Agent';
  const timeline = runId ? h('a', { class: 'run-link small-text', href: `#/runs/${id(runId)}`, text: 'Timeline of this reply' }) : null;
  return h('div', { class: `message ${message.role}${who !== 'You' && message.role === 'user' ? ' arrived' : ''}` }, h('div', { class: 'role', text: who }), parts, timeline);
}

// Who asked: a person ("You"), or a run's prompt the session API marks with `meta` (a scheduled
// heartbeat's, a manual run's) - the model never sees that mark.
function promptLabel(meta) {
  if (!meta) return 'You';
  if (meta.kind === 'heartbeat') return meta.trigger === 'manual' ? 'Manual run' : 'Scheduled prompt';
  if (meta.kind === 'manual') return 'Manual run';
  if (meta.trigger === 'webhook') return 'Webhook';
  return 'You';
}

function toolView(call, result, detail) {
  const text = result ? resultText(result.content) : null;
  const out = h('pre', { text: text ?? '' });
  let full = null;
  if (detail && detail.fullResultKept) {
    full = h('button', { type: 'button', class: 'small secondary full-result' }, `Show the full result (${detail.truncated} characters)`);
    full.addEventListener('click', () => busy(full, async () => {
      const kept = await get(`/api/runs/${id(detail.runId)}/tool-results/${id(detail.toolUseId)}`);
      out.textContent = resultText(kept.result.content || kept.result);
      full.remove();
    }));
  }
  const decided = detail && detail.decision ? ` · ${detail.decidedBy === 'expired' ? 'approval expired' : detail.decision === 'approve' ? 'approved' : 'denied'}` : '';
  const facts = detail && (detail.connection || decided)
    ? h('span', { class: 'tool-meta muted', text: `${detail.connection ? ` · ${detail.connection} · ${Math.round(detail.durationMs || 0)} ms` : ''}${detail.error ? ` · ${detail.error}` : ''}${decided}` })
    : null;
  return h('details', { class: `tool-call${result && result.is_error ? ' tool-error' : ''}` },
    h('summary', {}, h('span', { class: 'tool-name', text: call.name }), facts,
      result ? h('span', { class: 'muted', text: result.is_error ? ' · error' : ' · done' }) : h('span', { class: 'muted', text: ' · no result' })),
    h('div', { class: 'tool-io' },
      h('div', { class: 'label', text: 'Input' }), h('pre', { text: pretty(call.input) }),
      text !== null ? [h('div', { class: 'label', text: 'Result' }), out, full] : null));
}

function resultText(content) {
  if (typeof content === 'string') return prettyJson(content);
  if (Array.isArray(content)) return content.map((b) => (b.type === 'text' ? prettyJson(b.text) : pretty(b))).join('\n');
  return pretty(content);
}

function prettyJson(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}

function usageView(u, elapsedMs) {
  if (!u) return null;
  return h('div', { class: 'usage-line' },
    `Last turn: ${fmtNum(u.inputTokens)} in · ${fmtNum(u.outputTokens)} out · cache ${fmtNum(u.cacheReadTokens)} read / ${fmtNum(u.cacheWriteTokens)} written · `,
    h('strong', { text: fmtCost(u.costUsd) }),
    h('span', { class: 'muted', text: ` · ${(elapsedMs / 1000).toFixed(1)} s` }));
}

function queuedView(runId, status) {
  return h('div', { class: 'queued', dataset: { runId } }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), ' Queued turn ',
    h('a', { href: `#/runs/${id(runId)}`, text: runId }), ' ', badge(status, status));
}

// A turn paused for the owner's approval (TL10): what was asked, and a card per call that waits.
// A call already shown on the page (the live turn's view) is not shown twice.
function awaitingView(runId, run, page) {
  const view = h('div', { class: 'awaiting', dataset: { runId, status: 'awaiting_approval' } },
    run.prompt ? h('div', { class: 'message user' }, h('div', { class: 'role', text: 'You' }), h('div', { class: 'text', text: run.prompt })) : null,
    h('p', { class: 'awaiting-note' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), ' The turn is paused until you decide (',
      h('a', { href: `#/runs/${id(runId)}`, text: 'its run' }), ').'));
  addApprovalCards(view, runId, held(run), page);
  return view;
}

function addApprovalCards(where, runId, approvals, page = where) {
  for (const approval of approvals) {
    if (page.querySelector(`.approval[data-tool-use-id="${CSS.escape(approval.toolUseId)}"]`)) continue;
    where.append(approvalCard(runId, approval));
  }
}

// Shows a queued (or paused) run once and follows it. The page's own POST and the listing of the
// session's runs can both name the same run (the listing may land between the POST's commit and
// its answer), so the check and the append happen together, with no await between them.
function track(runId, status, pending, reload, run = null) {
  if (pending.querySelector(`[data-run-id="${CSS.escape(runId)}"]`)) return;
  pending.append(status === 'awaiting_approval' && run ? awaitingView(runId, run, pending.closest('.chat-main') || pending) : queuedView(runId, status));
  follow(runId, pending, reload);
}

// Follows an async run until it finishes, then shows the transcript it wrote. A run that pauses
// for approval shows its pending calls (once: a card being filled in is left alone).
async function follow(runId, pending, reload, settled = () => false) {
  let touched = Date.now(); // a run waiting for a person is asked less often after half a minute
  let waiting = false;
  for (;;) {
    if (await nap(waiting && Date.now() - touched > 30_000 ? WAITING_POLL_MS : POLL_MS)) touched = Date.now();
    if (!pending.isConnected || settled()) return;
    let run;
    try {
      run = await get(`/api/runs/${id(runId)}`);
    } catch (err) {
      showError(err);
      return;
    }
    const view = pending.querySelector(`[data-run-id="${CSS.escape(runId)}"]`);
    waiting = run.status === 'awaiting_approval';
    if (run.status === 'awaiting_approval') {
      const page = pending.closest('.chat-main') || pending;
      const unseen = held(run).filter((a) => !page.querySelector(`.approval[data-tool-use-id="${CSS.escape(a.toolUseId)}"]`));
      if (!view && !unseen.length) continue; // its live view shows the calls
      if (view && view.dataset.status === 'awaiting_approval') addApprovalCards(view, runId, held(run), page);
      else if (view) view.replaceWith(awaitingView(runId, run, page));
      else pending.append(awaitingView(runId, run, page));
      continue;
    }
    if (run.status === 'queued' || run.status === 'running') {
      if (view && view.dataset.status === 'awaiting_approval') {
        // decided: the cards say so until the turn ends; the note says it goes on
        view.querySelector('.awaiting-note')?.replaceChildren(h('span', { class: 'spinner', 'aria-hidden': 'true' }), ' The turn goes on…');
      } else if (view) view.replaceWith(queuedView(runId, run.status));
      continue;
    }
    if (view) view.remove();
    if (run.status === 'failed') {
      pending.append(h('div', { class: 'error', role: 'alert' }, h('strong', { text: `${errorTitle(run.error?.code || 'failed')}:` }), ' ', run.error?.message || 'the queued turn failed', ` (run ${runId})`));
    }
    await reload(run);
    return;
  }
}

// Queued or running turns of this session (from an earlier page, or another tab).
async function watchQueued(agent, sessionId, pending, reload, resumedEnded = reload) {
  try {
    const page = await get(`/api/agents/${id(agent.id)}/runs`, { limit: 20 });
    for (const run of page.items) {
      if (run.sessionId !== sessionId) continue;
      if (run.status === 'queued' || run.status === 'running') track(run.id, run.status, pending, reload);
      else if (run.status === 'awaiting_approval') track(run.id, run.status, pending, resumedEnded, { ...run, pendingApprovals: await pendingOf(run) });
    }
  } catch {
    // the transcript still shows; the runs page has the details
  }
}

