// Server statistics, live throughput (from successive /stats samples) and cluster nodes.

import { h, link, table } from '../dom.js';
import { LineChart } from '../chart.js';
import { bytes, duration, parseSize, rate } from '../format.js';

const POLL_MS = 2000;

export async function render(ctx) {
  if (!ctx.caps.readServers) {
    return h('div', null, h('h1', null, 'Overview'), h('p', { class: 'muted', id: 'no-stats' },
      'Server statistics need the read_servers permission. ', link('#/streams', 'Browse streams')));
  }
  const cards = h('div', { class: 'cards', id: 'stats' });
  const canvas = h('canvas', { id: 'throughput', class: 'chart' });
  const legend = h('div', { class: 'legend', id: 'throughput-now' });
  const chart = new LineChart(canvas, ['messages/s in', 'KB/s in', 'polls/s']);
  const nodes = h('div', { id: 'nodes' });
  let last = null;
  ctx.every(async () => {
    try {
      const stats = await ctx.api.get('/stats');
      const polls = pollCount(await ctx.api.metrics());
      cards.replaceChildren(...statCards(stats));
      const now = { t: performance.now(), messages: stats.messages_count,
        bytes: parseSize(stats.messages_size_bytes), polls };
      if (last) {
        const dt = (now.t - last.t) / 1000;
        const values = [Math.max(0, now.messages - last.messages) / dt,
          Math.max(0, now.bytes - last.bytes) / dt / 1000,
          polls === null || last.polls === null ? 0 : Math.max(0, polls - last.polls) / dt];
        chart.push(values);
        legend.replaceChildren(...chart.series.map((s, i) => h('span', { class: 'key', dataset: { series: String(i) } },
          h('i', { class: `swatch s${i}` }), `${s.name}: ${rate(values[i])}`)));
      }
      last = now;
    } catch (err) {
      legend.replaceChildren(h('span', { class: 'error' }, err.message));
    }
  }, POLL_MS);
  renderNodes(ctx, nodes);
  return h('div', null, h('h1', null, 'Overview'), cards,
    h('h2', null, 'Throughput'), h('p', { class: 'muted' },
      'Sampled every 2 s from /stats (messages stored) and /metrics (poll requests, when metrics are on).'),
    canvas, legend, h('h2', null, 'Cluster'), nodes);
}

function statCards(s) {
  const card = (label, value) => h('div', { class: 'card' }, h('div', { class: 'label' }, label), h('div', { class: 'value' }, value));
  return [
    card('Version', s.iggy_server_version), card('Uptime', duration(s.run_time)),
    card('Messages', s.messages_count), card('Stored', bytes(parseSize(s.messages_size_bytes))),
    card('Streams', s.streams_count), card('Topics', s.topics_count),
    card('Partitions', s.partitions_count), card('Segments', s.segments_count),
    card('Clients', s.clients_count), card('Consumer groups', s.consumer_groups_count),
    card('CPU', `${Number(s.cpu_usage).toFixed(1)} %`),
    card('Memory', `${bytes(parseSize(s.memory_usage))} of ${bytes(parseSize(s.total_memory))}`),
    card('Threads', s.threads_count), card('Host', s.hostname), card('OS', s.os_version || s.os_name),
    card('Kernel', s.kernel_version),
  ];
}

// Total successful poll_messages commands from the Prometheus text, or null.
function pollCount(text) {
  if (!text) return null;
  let total = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('lurcher_commands_total{') && line.includes('command="poll_messages"') && line.includes('outcome="ok"')) {
      total += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return total;
}

async function renderNodes(ctx, el) {
  try {
    const meta = await ctx.api.get('/cluster/metadata');
    el.replaceChildren(h('p', null, `Cluster: ${meta.name}`), table([
      { title: 'Node', cell: n => n.name }, { title: 'Address', cell: n => n.ip },
      { title: 'Role', cell: n => n.role }, { title: 'Status', cell: n => n.status },
      { title: 'Endpoints', cell: n => Object.entries(n.endpoints).filter(([, p]) => p).map(([k, p]) => `${k}:${p}`).join(' ') },
    ], meta.nodes));
  } catch (err) {
    el.replaceChildren(h('p', { class: 'muted' }, `Cluster metadata unavailable: ${err.message}`));
  }
}
