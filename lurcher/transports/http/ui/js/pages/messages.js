// The message browser of one topic: poll a partition by offset, timestamp, first or last,
// then page back and forth; show payloads as JSON, text or hex with decoded headers; a live
// tail; a send form.

import { h, link, button, form, field, input, select, toast, shown } from '../dom.js';
import { topicPath, seg } from '../api.js';
import { encodeText, headerLines, micros, parseHeaderLines, payloadView, fromBase64, toBase64, wholeNumber, SHOWN_BYTES } from '../format.js';

const TAIL_MS = 1000;
const TAIL_BATCH = 200;
const MAX_COUNT = 1000;
const TAIL_KEEP = 500;

export async function render(ctx, [sid, tid]) {
  const [stream, topic] = await Promise.all([ctx.api.get(`/streams/${seg(sid)}`), ctx.api.get(topicPath(sid, tid))]);
  const page = { ctx, sid, tid, topic, view: 'json' };
  const parts = [
    h('p', { class: 'crumbs' }, link('#/streams', 'Streams'), ' / ', link(`#/streams/${sid}`, stream.name), ' / ',
      link(`#/streams/${sid}/topics/${tid}`, topic.name), ' / messages'),
    h('h1', null, 'Messages of ', topic.name),
  ];
  if (ctx.caps.poll(sid, tid)) parts.push(browser(page), tail(page));
  else parts.push(h('p', { class: 'muted' }, 'You may not read messages of this topic.'));
  if (ctx.caps.send(sid, tid)) parts.push(sendForm(page));
  return h('div', null, parts);
}

function partitionIds(topic) {
  return topic.partitions.map(p => String(p.id));
}

async function poll(page, partition, kind, value, count) {
  const q = new URLSearchParams({ partition_id: partition, kind, value: String(value), count: String(count), auto_commit: 'false' });
  return page.ctx.api.get(`${topicPath(page.sid, page.tid)}/messages?${q}`);
}

function browser(page) {
  const list = h('div', { id: 'messages', class: 'messages' });
  const status = h('p', { id: 'poll-status', class: 'muted' });
  const pager = h('p', { class: 'actions', id: 'poll-pager' });
  const el = form({ id: 'poll-form', class: 'form inline' }, [
    field('Partition', select('partition', partitionIds(page.topic), partitionIds(page.topic)[0])),
    field('From', select('kind', ['offset', 'timestamp', 'first', 'last'], 'offset')),
    field('Offset / timestamp (µs or date)', input('value', { value: '0', id: 'poll-value' })),
    field('Count', input('count', { type: 'number', min: 1, max: MAX_COUNT, value: '50', id: 'poll-count' })),
    field('Show as', select('view', ['json', 'text', 'hex'], 'json')),
    h('button', { type: 'submit', id: 'poll-submit' }, 'Poll')],
  async v => {
    page.view = v.view;
    const count = Math.min(Number(v.count) || 1, MAX_COUNT);
    const polled = await poll(page, v.partition, v.kind, pollValue(v.kind, v.value), count);
    pager.replaceChildren(...pageButtons(el, polled.messages, count));
    const started = performance.now();
    list.replaceChildren(renderMessages(polled.messages, page.view, polled.partition_id));
    void list.offsetHeight; // include layout in the measurement
    const ms = performance.now() - started;
    status.dataset.renderMs = ms.toFixed(1);
    status.dataset.count = String(polled.messages.length);
    status.textContent = `${polled.messages.length} messages (partition offset ${polled.current_offset}), rendered in ${ms.toFixed(1)} ms`;
  });
  return h('section', null, h('h2', null, 'Browse'), el, status, pager, list);
}

// Previous and next page of a poll, from the offsets of the messages shown: a partition of
// millions of offsets is browsed a page at a time, not by typing each page's offset.
function pageButtons(formEl, messages, count) {
  if (!messages.length) return [];
  const first = BigInt(String(messages[0].header.offset));
  const last = BigInt(String(messages[messages.length - 1].header.offset));
  const from = offset => () => {
    formEl.elements.namedItem('kind').value = 'offset';
    formEl.elements.namedItem('value').value = String(offset);
    formEl.requestSubmit();
  };
  const back = first > BigInt(count) ? first - BigInt(count) : 0n;
  return [first > 0n && button('← Previous', from(back), { class: 'secondary', id: 'poll-previous' }),
    button('Next →', from(last + 1n), { class: 'secondary', id: 'poll-next' })].filter(Boolean);
}

// A timestamp may be typed as µs or as a date the browser can parse.
function pollValue(kind, text) {
  if (kind !== 'timestamp' || /^\d*$/.test(text.trim())) return text.trim() || '0';
  const ms = Date.parse(text);
  if (Number.isNaN(ms)) throw new Error(`not a date or µs timestamp: ${text}`);
  return String(ms * 1000);
}

export function renderMessages(messages, view, partition) {
  const fragment = document.createDocumentFragment();
  for (const m of messages) fragment.append(messageNode(m, view, partition));
  return fragment;
}

function messageNode(m, view, partition) {
  const head = m.header;
  const headers = headerLines(m.user_headers);
  return h('article', { class: 'msg', dataset: { offset: String(head.offset), partition: String(partition) } },
    h('div', { class: 'meta' }, h('b', null, `#${head.offset}`), ` partition ${partition} · ${micros(head.timestamp)} · id ${head.id} · ${head.payload_length} B`),
    headers.length ? h('ul', { class: 'headers' }, headers.map(line => h('li', null, line))) : null,
    h('pre', { class: 'payload' }, payloadView(fromBase64(m.payload, SHOWN_BYTES), view, head.payload_length)));
}

function tail(page) {
  const list = h('div', { id: 'tail', class: 'messages tail' });
  const state = h('span', { id: 'tail-state', class: 'muted' }, 'off');
  const partition = select('partition', ['all', ...partitionIds(page.topic)], 'all');
  let next = null; // partition id -> next offset to read
  let timer = null;
  let busy = false;
  const step = async () => {
    if (busy) return; // a slow round must not overlap the next (messages would repeat)
    busy = true;
    try {
      if (next === null) next = await startOffsets(page);
      const pids = partition.value === 'all' ? partitionIds(page.topic) : [partition.value];
      for (const pid of pids) {
        const polled = await poll(page, pid, 'offset', next.get(pid) || 0, TAIL_BATCH);
        if (restarted(polled, next.get(pid) || 0)) next.set(pid, 0);
        if (!polled.messages.length) continue;
        next.set(pid, polled.messages[polled.messages.length - 1].header.offset + 1);
        list.append(renderMessages(polled.messages, page.view, pid));
        while (list.childElementCount > TAIL_KEEP) list.firstElementChild.remove();
      }
      state.textContent = `following ${partition.value === 'all' ? 'all partitions' : `partition ${partition.value}`}`;
    } catch (err) {
      state.replaceChildren(shown(err.message));
    } finally {
      busy = false;
    }
  };
  const toggle = h('input', { type: 'checkbox', id: 'tail-toggle', onchange: () => {
    if (toggle.checked) {
      next = null;
      timer = setInterval(step, TAIL_MS);
      page.ctx.timers.push(timer);
      step();
    } else {
      clearInterval(timer);
      state.textContent = 'off';
    }
  } });
  partition.addEventListener('change', () => { next = null; list.replaceChildren(); });
  return h('section', null, h('h2', null, 'Live tail'),
    h('div', { class: 'form inline' }, field('Partition', partition), h('label', { class: 'check' }, toggle, ' follow new messages'), state),
    list);
}

// A partition whose newest offset is now below the one the tail read last was purged (its
// offsets start again at 0): the tail goes on from 0, where it waited for the old next
// offset and missed every message until the partition grew past it.
function restarted(polled, from) {
  return !polled.messages.length && from > 0 && Number(polled.current_offset) + 1 < from;
}

// The tail starts after the newest message of each partition when it is switched on.
async function startOffsets(page) {
  const topic = await page.ctx.api.get(topicPath(page.sid, page.tid));
  return new Map(topic.partitions.map(p => [String(p.id), p.messages_count ? p.current_offset + 1 : 0]));
}

function sendForm(page) {
  return form({ id: 'send-form' }, [
    h('h2', null, 'Send a message'),
    field('Payload', h('textarea', { name: 'payload', rows: 4, id: 'send-payload' })),
    field('Headers (one per line: key=value or key:kind=value, kinds: string bool int8…uint64 float32 float64 raw)',
      h('textarea', { name: 'headers', rows: 2, id: 'send-headers' })),
    field('Partitioning', select('partitioning', ['balanced', 'partition_id', 'messages_key'], 'balanced')),
    field('Partition id or key', input('partition_value', { id: 'send-partition-value' })),
    field('Message id (empty: assigned)', input('id', { id: 'send-id' })),
    h('button', { type: 'submit', id: 'send-submit' }, 'Send')],
  async v => {
    const message = { payload: toBase64(encodeText(v.payload)), user_headers: parseHeaderLines(v.headers) };
    if (v.id.trim()) message.id = v.id.trim(); // decimal or UUID text: exact for 128-bit ids
    await page.ctx.api.post(`${topicPath(page.sid, page.tid)}/messages`,
      { partitioning: partitioning(v.partitioning, v.partition_value), messages: [message] });
    toast('Message sent', 'ok');
  });
}

// A partition id that is not a u32 is refused: setUint32 sent "abc", "" and "1.5" to
// partition 0 and 4294967297 to partition 1.
function partitioning(kind, value) {
  if (kind === 'partition_id') {
    const id = new Uint8Array(4);
    let number;
    try { number = wholeNumber(value.trim(), 32, false); } catch (err) { throw new Error(`partition id: ${err.message}`); }
    new DataView(id.buffer).setUint32(0, Number(number), true);
    return { kind, value: toBase64(id) };
  }
  if (kind === 'messages_key') return { kind, value: toBase64(encodeText(value)) };
  return { kind: 'balanced', value: '' };
}
