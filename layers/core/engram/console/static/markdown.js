// An agent's reply as Markdown: headings, lists, tables, code blocks (with a copy button) and
// links (a new tab, rel=noopener). The text is the model's, so it is data: marked (pinned, vendored
// from layers/console-vendor) turns it into HTML with every raw HTML piece escaped to text, and
// DOMPurify then keeps only plain formatting elements and http(s)/mailto links, so no script,
// event handler, `javascript:` or data: URL ever reaches the page. The page's CSP forbids inline
// code besides. Both libraries (~27 kB gzipped) load on the first reply shown, not with the page;
// until then, and if they fail to load, the reply shows as plain text.
import { h } from './ui.js';

const ALLOWED_TAGS = ['a', 'b', 'blockquote', 'br', 'code', 'del', 'em', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'hr', 'i',
  'li', 'ol', 'p', 'pre', 'strong', 'table', 'tbody', 'td', 'th', 'thead', 'tr', 'ul'];
const ALLOWED_ATTR = ['href', 'title', 'align', 'start'];
const SAFE_URL = /^(?:https?:|mailto:|#)/i;

let loading = null;

function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function load() {
  loading ??= Promise.all([import('./marked.esm.js'), import('./purify.min.js')]).then(([{ Marked }]) => {
    const purify = globalThis.DOMPurify;
    if (!purify || !purify.isSupported) throw new Error('the sanitiser did not load');
    const marked = new Marked({ gfm: true, breaks: true, async: false });
    // Raw HTML in the reply is shown as the text it is, never parsed.
    marked.use({ renderer: { html: ({ text }) => escapeHtml(text) } });
    purify.addHook('afterSanitizeAttributes', (node) => {
      if (node.tagName === 'A') {
        const href = node.getAttribute('href') || '';
        if (!SAFE_URL.test(href)) node.removeAttribute('href');
        else if (!href.startsWith('#')) {
          node.setAttribute('target', '_blank');
          node.setAttribute('rel', 'noopener noreferrer');
        }
      }
    });
    const config = { ALLOWED_TAGS, ALLOWED_ATTR, ALLOWED_URI_REGEXP: SAFE_URL, ADD_ATTR: ['target'], RETURN_DOM_FRAGMENT: true };
    return (text) => purify.sanitize(marked.parse(text), config);
  });
  return loading;
}

function decorate(fragment) {
  for (const pre of fragment.querySelectorAll('pre')) {
    const code = pre.textContent;
    const copy = h('button', { type: 'button', class: 'small secondary copy-code', 'aria-label': 'Copy the code' }, 'Copy');
    copy.addEventListener('click', async () => {
      try {
        await navigator.clipboard.writeText(code);
        copy.textContent = 'Copied';
      } catch {
        copy.textContent = 'Copy failed';
      }
      setTimeout(() => { copy.textContent = 'Copy'; }, 2000);
    });
    pre.replaceWith(h('div', { class: 'code-block' }, copy, pre.cloneNode(true)));
  }
  for (const table of fragment.querySelectorAll('table')) table.replaceWith(h('div', { class: 'table-wrap' }, table.cloneNode(true)));
  return fragment;
}

// Shows `text` in `el` as plain text at once, then as rendered Markdown. Called again with the
// longer text while a reply streams; the newest call wins.
export function renderMarkdown(el, text) {
  el.classList.add('markdown');
  el.dataset.source = text;
  if (!el.childElementCount) el.textContent = text;
  load().then((render) => {
    if (el.dataset.source !== text) return; // a newer text arrived meanwhile
    el.replaceChildren(decorate(render(text)));
  }).catch(() => { el.textContent = text; });
  return el;
}

// A reply's text element, rendered.
export const markdownView = (text, attrs = {}) => renderMarkdown(h('div', { class: 'text', ...attrs }), text);
