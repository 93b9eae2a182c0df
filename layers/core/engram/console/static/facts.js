// "What I know about you" (UF1-UF5): the user's facts with source and confidence; add, edit,
// promote/demote, archive with a reason, restore, show archived. Also the account: export my data
// and delete my account (typed confirmation).
import { get, post, patch, del, id } from './api.js';
import * as auth from './auth.js';
import {
  h, clear, busy, badge, fmtTime, moreButton, notice, errorBox, fmtBytes, latestOnly, clearMessages, FAREWELL,
} from './ui.js';
import { confirmAction, dialog, field, showFormError } from './forms.js';

const STALE_DAYS = 60;

export async function facts(main) {
  const archived = h('input', { type: 'checkbox', id: 'facts-archived' });
  const search = h('input', { type: 'search', id: 'facts-search', name: 'q', maxlength: 200, placeholder: 'words in a fact or its topic' });
  const list = h('div', { class: 'facts-list' }, h('p', { class: 'loading', text: 'Loading facts…' }));
  const more = h('div');
  let items = [];

  const begin = latestOnly();
  const load = async (nextToken) => {
    const current = begin();
    const q = search.value.trim(); // searched by the API over every fact, best match first
    const page = await get('/api/me/facts', { includeArchived: archived.checked ? 'true' : undefined, q, nextToken });
    if (!current()) return; // an older load answered after a newer one
    items = nextToken ? items.concat(page.items) : page.items;
    const empty = q ? `No fact matches “${q}”.` : archived.checked ? 'No facts at all yet.' : 'I know nothing about you yet. Tell an agent something to remember, or add a fact here.';
    clear(list, items.length ? items.map(factView) : h('p', { class: 'empty', text: empty }));
    clear(more, moreButton(page.nextToken, load));
  };

  const factView = (f) => {
    const stale = !f.archivedAt && f.lastReferencedAt && (Date.now() - new Date(f.lastReferencedAt)) / 86_400_000 > STALE_DAYS;
    const actions = h('div', { class: 'row-actions' });
    if (f.archivedAt) {
      const restore = h('button', { type: 'button', class: 'small' }, 'Restore');
      restore.addEventListener('click', () => busy(restore, async () => { await patch(`/api/me/facts/${id(f.id)}`, { archived: false }); await load(); }));
      actions.append(restore);
    } else {
      const edit = h('button', { type: 'button', class: 'small secondary' }, 'Edit');
      edit.addEventListener('click', () => editFact(f, load));
      const flip = h('button', { type: 'button', class: 'small secondary' }, f.confidence === 'asserted' ? 'Mark inferred' : 'Confirm (asserted)');
      flip.addEventListener('click', () => busy(flip, async () => {
        await patch(`/api/me/facts/${id(f.id)}`, { confidence: f.confidence === 'asserted' ? 'inferred' : 'asserted' });
        await load();
      }));
      const archive = h('button', { type: 'button', class: 'small danger' }, 'Archive');
      archive.addEventListener('click', () => archiveFact(f, load));
      actions.append(edit, flip, archive);
    }
    return h('article', { class: `card fact${f.archivedAt ? ' archived' : ''}`, dataset: { factId: f.id } },
      h('p', { class: 'fact-text', text: f.fact }),
      h('div', { class: 'tags' },
        badge(`source: ${f.source}`, f.source), badge(`confidence: ${f.confidence}`, f.confidence),
        f.topic ? badge(`topic: ${f.topic}`, 'topic') : null,
        f.archivedAt ? badge(`archived: ${f.archivedReason || 'user_deleted'}`, 'archived') : null,
        stale ? badge(`not referenced in ${STALE_DAYS}+ days`, 'warn') : null),
      h('div', { class: 'muted small-text', text: `Added ${fmtTime(f.createdAt)} · last referenced ${fmtTime(f.lastReferencedAt)}${f.archivedAt ? ` · archived ${fmtTime(f.archivedAt)}` : ''}` }),
      actions);
  };

  archived.addEventListener('change', () => busy(null, () => load()));
  let typing;
  search.addEventListener('input', () => { clearTimeout(typing); typing = setTimeout(() => busy(null, () => load()), 250); });

  const text = h('textarea', { name: 'fact', rows: 2, required: true });
  const topic = h('input', { name: 'topic', maxlength: 40 });
  const add = h('form', { class: 'card' }, h('h2', { text: 'Tell it something' }), h('div', { class: 'form-error' }),
    field('Fact', text), field('Topic (optional)', topic), h('button', { type: 'submit' }, 'Add fact'));
  add.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearMessages();
    try {
      await post('/api/me/facts', { fact: text.value.trim(), topic: topic.value.trim() || undefined, confidence: 'asserted' });
      text.value = ''; topic.value = '';
      for (const el of add.querySelectorAll('.field-error, .form-error')) el.textContent = '';
      notice('Fact saved.');
      await load();
    } catch (err) {
      showFormError(add, err);
    }
  });

  clear(main,
    h('h1', { text: 'What I know about you' }),
    h('p', { class: 'muted', text: 'Agents remember these facts about you across every agent and session. The 10 most recently referenced active facts go into each prompt. Edit or archive anything that is wrong.' }),
    h('div', { class: 'filters' }, field('Search', search), field('Show archived', archived)),
    list, more, add, accountSection());
  await load();
}

async function editFact(f, reload) {
  clearMessages();
  const text = h('textarea', { name: 'fact', rows: 3, value: f.fact });
  const topic = h('input', { name: 'topic', maxlength: 40, value: f.topic || '' });
  const form = h('form', {}, h('div', { class: 'form-error' }), field('Fact', text), field('Topic', topic));
  setTimeout(() => text.focus(), 0);
  for (;;) {
    const ok = await dialog({ title: 'Edit fact', body: form, actions: [{ label: 'Cancel', value: false }, { label: 'Save', value: true }] });
    if (!ok) return;
    try {
      await patch(`/api/me/facts/${id(f.id)}`, { fact: text.value.trim(), topic: topic.value.trim() || null });
      await reload();
      return;
    } catch (err) {
      showFormError(form, err);
    }
  }
}

async function archiveFact(f, reload) {
  const reason = h('select', { name: 'archivedReason' },
    h('option', { value: 'user_deleted' }, 'No longer true or not wanted'),
    h('option', { value: 'user_corrected' }, 'It was wrong (corrected)'));
  const ok = await dialog({
    title: 'Archive this fact?',
    body: [h('p', { text: f.fact }), field('Reason', reason), h('p', { class: 'muted', text: 'It leaves every prompt; you can restore it from the archived list.' })],
    actions: [{ label: 'Cancel', value: false }, { label: 'Archive', value: true, class: 'danger' }],
  });
  if (!ok) return;
  await busy(null, async () => {
    await patch(`/api/me/facts/${id(f.id)}`, { archived: true, archivedReason: reason.value });
    await reload();
  });
}

function accountSection() {
  const status = h('div', { class: 'export-status', 'aria-live': 'polite' });
  const exportButton = h('button', { type: 'button' }, 'Export my data');
  exportButton.addEventListener('click', () => busy(exportButton, async () => {
    const started = await post('/api/me/export');
    clear(status, h('span', { class: 'spinner', 'aria-hidden': 'true' }), ' Exporting…');
    for (;;) {
      await new Promise((r) => setTimeout(r, 1000));
      const job = await get(`/api/me/export/${id(started.id)}`);
      if (job.status === 'succeeded') {
        const total = Object.values(job.counts || {}).reduce((a, b) => a + b, 0);
        clear(status, h('a', { href: job.downloadUrl, download: `engram-export-${job.id}.jsonl`, class: 'button', id: 'export-download' }, 'Download (JSON Lines)'),
          h('span', { class: 'muted', text: ` ${total} ${total === 1 ? 'record' : 'records'} · ${fmtBytes(job.bytes)} · link valid until ${fmtTime(job.downloadUrlExpiresAt)}` }));
        return;
      }
      if (job.status === 'failed') {
        clear(status, errorBox(job.error || { code: 'export_failed', message: 'the export failed; start another' }));
        return;
      }
      clear(status, h('span', { class: 'spinner', 'aria-hidden': 'true' }), ` Exporting… ${fmtBytes(job.bytes || 0)}`);
    }
  }, status));
  const deleteButton = h('button', { type: 'button', class: 'danger' }, 'Delete my account');
  deleteButton.addEventListener('click', async () => {
    const ok = await confirmAction('This deletes every agent, session, transcript, memory, fact, run and usage row of your account. It cannot be undone.', { typed: 'delete', label: 'Delete everything' });
    if (!ok) return;
    await busy(deleteButton, async () => {
      const done = await del('/api/me');
      // Said on the sign-in page the sign-out leads to (a notice here would vanish with the reload).
      sessionStorage.setItem(FAREWELL, JSON.stringify(done.deleted || {}));
      auth.signOut();
    });
  });
  return h('section', { class: 'card account' }, h('h2', { text: 'Your data' }),
    h('p', { class: 'muted', text: 'Export everything the stack holds about you as JSON Lines, or delete it all.' }),
    h('div', { class: 'actions' }, exportButton, deleteButton), status);
}
