// DOM building without HTML strings: every piece of data becomes a text node or a
// property, never markup. Attribute names come from code only. Text nodes show explicit
// bidi controls and invisible characters as visible marks (shown), so data cannot reorder
// the text around it nor pass for other text.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) setAttr(el, key, value);
  add(el, children);
  return el;
}

function setAttr(el, key, value) {
  if (value === undefined || value === null || value === false) return;
  if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
  else if (key === 'class') el.className = value;
  else if (key === 'dataset') Object.assign(el.dataset, value);
  else if (key === 'value' || key === 'checked' || key === 'disabled') el[key] = value;
  else el.setAttribute(key, value === true ? '' : String(value));
}

export function add(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(shown(String(child))));
  }
  return el;
}

// Embedding, override and isolate controls (U+202A-U+202E, U+2066-U+2069) in a name, header
// or reason would reorder the console's own words after it (a stream named "x" + U+202E made
// 'Delete stream "x" and all its topics?' read '"x?scipot sti lla dna"'), and <bdi> does not
// hold them (a U+2069 inside ends its isolate): text shows each as a visible [U+202E].
// Characters that draw nothing and join nothing (soft hyphen, zero-width space, direction
// marks, word joiner, invisible operators, byte order mark) are shown the same way: a stream
// "orders" + U+200B or a user "iggy" + U+2060 looked exactly like "orders" and "iggy" beside
// them. The joiners U+200C and U+200D stay, as emoji and scripts are drawn with them.
const HIDDEN = /[\u00AD\u061C\u180E\u200B\u200E\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]/g;

export function shown(text) {
  return text.replace(HIDDEN, c => `[U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}]`);
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

// A table from column specs [{title, cell: row => node|string}] and rows. A string cell is
// a span.text, which the style sheet lets wrap past a width (like a link cell).
export function table(columns, rows, attrs) {
  const head = h('thead', null, h('tr', null, columns.map(c => h('th', null, c.title))));
  const body = h('tbody');
  for (const row of rows) body.append(h('tr', null, columns.map(c => h('td', null, cellContent(c.cell(row))))));
  const empty = rows.length ? null : h('p', { class: 'muted' }, 'Nothing here yet.');
  return h('div', { class: 'table-wrap' }, h('table', attrs, head, body), empty);
}

function cellContent(value) {
  return typeof value === 'string' ? h('span', { class: 'text' }, value) : value;
}

export function link(href, text) {
  return h('a', { href }, text);
}

export function button(text, onclick, attrs) {
  return h('button', { type: 'button', onclick, ...(attrs || {}) }, text);
}

export function field(label, input) {
  return h('label', { class: 'field' }, h('span', null, label), input);
}

export function input(name, attrs) {
  return h('input', { name, ...(attrs || {}) });
}

export function select(name, options, value) {
  return h('select', { name }, options.map(o => h('option', { value: o, selected: o === value }, o)));
}

// A form whose submit handler gets the named values; errors are shown next to it.
export function form(attrs, children, onSubmit) {
  const status = h('span', { class: 'form-status' });
  const el = h('form', { class: 'form', ...(attrs || {}) }, children, status);
  el.addEventListener('submit', async event => {
    event.preventDefault();
    clear(status);
    try {
      await onSubmit(values(el), el);
    } catch (err) {
      add(status, [err.message]);
      status.className = 'form-status error';
    }
  });
  return el;
}

export function values(formEl) {
  const out = {};
  for (const el of formEl.elements) {
    if (!el.name) continue;
    out[el.name] = el.type === 'checkbox' ? el.checked : el.value;
  }
  return out;
}

export function toast(text, kind) {
  const el = h('div', { class: `toast ${kind || ''}` }, text);
  document.getElementById('toasts').append(el);
  setTimeout(() => el.remove(), 5000);
}

// A modal confirmation; resolves true only when the user presses the named action.
export function confirmAction(question, action) {
  return new Promise(resolve => {
    const done = answer => { dialog.close(); dialog.remove(); resolve(answer); };
    const dialog = h('dialog', { class: 'confirm' },
      h('p', null, question),
      h('div', { class: 'actions' },
        button('Cancel', () => done(false), { class: 'secondary', 'data-role': 'cancel' }),
        button(action, () => done(true), { class: 'danger', 'data-role': 'confirm' })));
    dialog.addEventListener('cancel', () => done(false));
    document.body.append(dialog);
    dialog.showModal();
  });
}

// Runs an action from a button; reports failures as a toast.
export async function attempt(fn, okText) {
  try {
    const result = await fn();
    if (okText) toast(okText, 'ok');
    return result;
  } catch (err) {
    toast(err.message, 'error');
    return undefined;
  }
}
