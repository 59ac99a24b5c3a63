// The console shell: sign-in state, navigation and a hash router. Each page module exports
// render(ctx, params) -> Node; timers a page starts through ctx.every() stop when the page
// is left, and so do its requests still queued; signing in again after a session ended goes
// back to the page it ended on. Only the latest call of show() draws: one that an awaited
// request outlived (a 401 signs out and shows the sign-in form meanwhile, or the user moved
// on) draws nothing. The signed-in user (ctx.me, ctx.caps) is read again on every
// navigation, so what a page offers follows permissions changed while the console is open.

import { Api } from './api.js';
import { h, clear, link, button } from './dom.js';
import { Capabilities } from './perms.js';
import * as login from './pages/login.js';
import * as overview from './pages/overview.js';
import * as streams from './pages/streams.js';
import * as topics from './pages/topics.js';
import * as partitions from './pages/partitions.js';
import * as messages from './pages/messages.js';
import * as groups from './pages/groups.js';
import * as offsets from './pages/offsets.js';
import * as clients from './pages/clients.js';
import * as users from './pages/users.js';
import * as tokens from './pages/tokens.js';

const T = '#/streams/(\\d+)/topics/(\\d+)';
const ROUTES = [
  ['#/overview', overview], ['#/streams', streams], ['#/streams/(\\d+)', topics],
  [T, partitions], [`${T}/messages`, messages], [`${T}/groups`, groups],
  [`${T}/offsets`, offsets], ['#/clients', clients], ['#/users', users], ['#/tokens', tokens],
];
// [hash, label, shown to whom]
const NAV = [['#/overview', 'Overview', () => true], ['#/streams', 'Streams', () => true],
  ['#/clients', 'Clients', caps => caps.readServers], ['#/users', 'Users', () => true],
  ['#/tokens', 'Access tokens', () => true]];

const ctx = {
  api: new Api(() => { ctx.caps = null; show(); }),
  caps: null,
  me: null,
  timers: [],
  shows: 0, // calls of show() so far: the latest one owns #main
  every(fn, ms) { fn(); this.timers.push(setInterval(fn, ms)); },
  go(hash) { if (location.hash === hash) show(); else location.hash = hash; },
};

async function loadMe() {
  const user = await ctx.api.get(`/users/${ctx.api.userId}`);
  ctx.me = user;
  ctx.caps = new Capabilities(user.permissions);
}

function stopTimers() {
  ctx.timers.forEach(clearInterval);
  ctx.timers = [];
}

function renderNav() {
  const nav = clear(document.getElementById('nav'));
  const who = clear(document.getElementById('who'));
  if (!ctx.caps) return;
  nav.append(...NAV.filter(([, , shown]) => shown(ctx.caps)).map(([href, text]) => link(href, text)));
  who.append(h('span', { id: 'username' }, ctx.me.username), ' ',
    button('Sign out', async () => { await ctx.api.signOut(); ctx.caps = null; ctx.go('#/login'); },
      { class: 'secondary', id: 'sign-out' }));
}

function match(hash) {
  for (const [pattern, page] of ROUTES) {
    const found = new RegExp(`^${pattern}$`).exec(hash);
    if (found) return [page, found.slice(1).map(Number)];
  }
  return null;
}

async function show() {
  stopTimers();
  ctx.api.dropQueued();
  const turn = ++ctx.shows;
  const current = () => turn === ctx.shows;
  const main = document.getElementById('main');
  if (!ctx.api.signedIn) {
    ctx.caps = null;
    renderNav();
    clear(main).append(login.render(ctx, async () => ctx.go(match(location.hash) ? location.hash : '#/overview')));
    return;
  }
  try {
    await loadMe();
  } catch (err) {
    if (current()) clear(main).append(h('p', { class: 'error', id: 'page-error' }, err.message));
    return;
  }
  if (!current()) return;
  renderNav();
  const found = match(location.hash) || match('#/overview');
  const [page, params] = found;
  const view = h('section', { class: 'page' }, h('p', { class: 'muted' }, 'Loading…'));
  clear(main).append(view);
  try {
    const content = await page.render(ctx, params);
    if (current()) view.replaceChildren(content);
  } catch (err) {
    if (current()) view.replaceChildren(h('p', { class: 'error', id: 'page-error' }, err.message));
  }
}

window.addEventListener('hashchange', show);
show();
