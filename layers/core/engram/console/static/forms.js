// Forms and dialogs: a modal dialog, a confirmation, a labelled field, an API error put beside the
// field it names, a secret shown once. Used by the pages that edit things (loaded with them), not
// by the first load's agents list, whose basics (h, errorBox, busy, ...) are ui.js.
import { h, clear, errorBox, errorTitle, showError } from './ui.js';

// A modal dialog (native <dialog>: Escape closes it). Resolves with the clicked action's value,
// or null when dismissed.
export function dialog({ title, body = [], actions = [{ label: 'Close', value: null }] }) {
  return new Promise((resolve) => {
    const dlg = h('dialog', { class: 'dialog', 'aria-label': title });
    // Cancel (a false or null value) looks secondary beside the action that does something.
    const buttons = actions.map((a) =>
      h('button', { type: 'button', class: a.class || (a.value === false || a.value === null ? 'secondary' : ''), onclick: async () => {
        if (a.check && !a.check()) return;
        dlg.close(); resolve(a.value);
      } }, a.label),
    );
    // An action with `check` and `why` is disabled while check() fails, and why() says what is missing.
    const why = h('p', { class: 'hint dialog-why', role: 'status' });
    const recheck = () => actions.forEach((a, i) => {
      if (!a.check || !a.why) return;
      buttons[i].disabled = !a.check();
      why.textContent = a.check() ? '' : a.why();
    });
    dlg.addEventListener('input', recheck);
    recheck();
    dlg.append(h('h2', { text: title }), ...[body].flat(), why, h('div', { class: 'actions' }, buttons));
    dlg.addEventListener('cancel', () => resolve(null));
    dlg.addEventListener('close', () => dlg.remove());
    document.body.append(dlg);
    dlg.showModal();
  });
}

// Asks before a destructive action; with `typed`, the person must type that word to confirm.
export async function confirmAction(message, { typed = null, label = 'Delete' } = {}) {
  const input = typed ? h('input', { type: 'text', id: 'confirm-typed', autocomplete: 'off' }) : null;
  const body = [h('p', { text: message })];
  if (typed) body.push(h('label', { for: 'confirm-typed' }, `Type ${typed} to confirm`), input);
  const answer = dialog({
    title: 'Are you sure?',
    body,
    actions: [
      { label: 'Cancel', value: false },
      { label, value: true, class: 'danger', check: () => !typed || input.value.trim() === typed,
        why: typed ? () => (input.value.trim() ? `That is not “${typed}”: type ${typed} exactly to enable ${label}.` : `Type ${typed} to enable ${label}.`) : null },
    ],
  });
  if (input) setTimeout(() => input.focus(), 0);
  return Boolean(await answer);
}

// A labelled form control: every input has a label (accessibility, and the tests find them by it).
export function field(label, control, hint) {
  const id = control.id || `f-${label.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${Math.random().toString(36).slice(2, 7)}`;
  control.id = id;
  const wrap = h('div', { class: 'field' });
  if (control.type === 'checkbox') {
    wrap.classList.add('check');
    wrap.append(control, h('label', { for: id, text: label }));
  } else {
    wrap.append(h('label', { for: id, text: label }), control);
  }
  if (hint) wrap.append(h('div', { class: 'hint', text: hint }));
  const error = h('div', { class: 'field-error', role: 'alert' });
  // An error about a value goes once the person changes that value.
  const forget = () => { error.textContent = ''; };
  control.addEventListener('input', forget);
  control.addEventListener('change', forget);
  wrap.append(error);
  return wrap;
}

// The control a field path names ("limits.dailyCostUsd", "tools.0.requireApproval"): the control
// of that exact name, else of its longest named prefix ("tools.0", then "tools").
function controlFor(form, path) {
  const parts = path ? String(path).split('.') : [];
  for (let n = parts.length; n > 0; n -= 1) {
    const control = form.querySelector(`[name="${CSS.escape(parts.slice(0, n).join('.'))}"]`);
    if (control && control.closest('.field')?.querySelector('.field-error')) return control;
  }
  return null;
}

// Puts an API error next to the field it names (error.field), and every other broken rule the
// API listed (error.details) next to its own field; what names no field goes at the form's top.
export function showFormError(form, err) {
  for (const el of form.querySelectorAll('.field-error')) { el.textContent = ''; delete el.dataset.code; }
  const control = controlFor(form, err && err.field);
  if (control) {
    const slot = control.closest('.field').querySelector('.field-error');
    slot.textContent = err.message || errorTitle(err.code);
    slot.dataset.code = err.code || '';
    for (const detail of (err.details || []).slice(1)) {
      const other = controlFor(form, detail.field);
      const otherSlot = other && other !== control ? other.closest('.field').querySelector('.field-error') : null;
      if (otherSlot && !otherSlot.textContent) { otherSlot.textContent = `${detail.field} ${detail.message}`; otherSlot.dataset.code = err.code || ''; }
    }
    control.focus();
    return;
  }
  const top = form.querySelector('.form-error');
  if (top) clear(top, errorBox(err));
  else showError(err);
}

// A secret shown once, with a Copy button (the clipboard where the browser allows it, else the
// text is selected for the person to copy).
export function secretBox(value) {
  const code = h('code', { class: 'secret', text: value });
  const status = h('span', { class: 'muted small-text', role: 'status' });
  const copy = h('button', { type: 'button', class: 'small secondary' }, 'Copy');
  copy.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(value);
      status.textContent = ' Copied.';
    } catch {
      const range = document.createRange();
      range.selectNodeContents(code);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      status.textContent = ' Selected: press Ctrl+C (⌘C) to copy.';
    }
  });
  return h('div', { class: 'secret-box' }, code, copy, status);
}
