// Users and their permissions: list, create, activate/deactivate, delete, edit global
// permissions and per-stream permissions (as JSON).

import { h, table, button, form, field, input, select, attempt } from '../dom.js';
import { seg } from '../api.js';
import { micros } from '../format.js';
import { dangerous } from './streams.js';

const GLOBAL = ['manage_servers', 'read_servers', 'manage_users', 'read_users', 'manage_streams',
  'read_streams', 'manage_topics', 'read_topics', 'poll_messages', 'send_messages'];

export async function render(ctx) {
  const caps = ctx.caps;
  const detail = h('div', { id: 'user-detail' });
  if (!caps.readUsers) {
    detail.append(permissionsView(ctx, ctx.me, false));
    return h('div', null, h('h1', null, 'Your permissions'), detail);
  }
  const users = await ctx.api.get('/users');
  const actions = u => [
    button('Permissions', async () => detail.replaceChildren(permissionsView(ctx, await ctx.api.get(`/users/${seg(u.id)}`), caps.manageUsers)),
      { class: 'secondary', 'data-action': 'permissions' }),
    caps.manageUsers && u.id !== ctx.me.id && button(u.status === 'active' ? 'Deactivate' : 'Activate', async () => {
      await attempt(() => ctx.api.put(`/users/${seg(u.id)}`, { status: u.status === 'active' ? 'inactive' : 'active' }), 'Updated');
      ctx.go(location.hash);
    }, { class: 'secondary' }),
    caps.manageUsers && u.id !== ctx.me.id && button('Delete', () => dangerous(ctx, `Delete user "${u.username}"?`, 'Delete',
      () => ctx.api.del(`/users/${seg(u.id)}`)), { class: 'danger', 'data-action': 'delete' }),
  ];
  const list = table([
    { title: 'ID', cell: u => u.id }, { title: 'Username', cell: u => u.username },
    { title: 'Status', cell: u => u.status }, { title: 'Created', cell: u => micros(u.created_at) },
    { title: '', cell: u => h('span', { class: 'row-actions' }, actions(u)) },
  ], users, { id: 'users-table' });
  const create = caps.manageUsers && form({ id: 'create-user' }, [
    h('h2', null, 'New user'),
    field('Username', input('username', { required: true })),
    field('Password', input('password', { type: 'password', required: true, autocomplete: 'new-password' })),
    field('Status', select('status', ['active', 'inactive'], 'active')),
    h('fieldset', null, h('legend', null, 'Global permissions'), GLOBAL.map(f => flagBox(f, false))),
    h('button', { type: 'submit' }, 'Create user')],
  async v => {
    const global = Object.fromEntries(GLOBAL.map(f => [f, v[f]]));
    await ctx.api.post('/users', { username: v.username, password: v.password, status: v.status,
      permissions: { global, streams: null } });
    ctx.go(location.hash);
  });
  return h('div', null, h('h1', null, 'Users'), list, detail, create);
}

function flagBox(flag, checked) {
  return h('label', { class: 'check' }, h('input', { type: 'checkbox', name: flag, checked: Boolean(checked) }), ` ${flag}`);
}

function permissionsView(ctx, user, editable) {
  const p = user.permissions || { global: {}, streams: null };
  const streams = JSON.stringify(p.streams || {}, null, 2);
  if (!editable) {
    return h('section', null, h('h2', null, `Permissions of ${user.username}`),
      h('ul', null, GLOBAL.filter(f => p.global && p.global[f]).map(f => h('li', null, f))),
      h('h3', null, 'Per stream'), h('pre', null, streams));
  }
  return form({ id: 'permissions-form' }, [
    h('h2', null, `Permissions of ${user.username}`),
    h('fieldset', null, h('legend', null, 'Global'), GLOBAL.map(f => flagBox(f, p.global && p.global[f]))),
    field('Per stream (JSON: {"<stream id>": {"read_stream": true, …, "topics": {"<topic id>": {…}}}})',
      h('textarea', { name: 'streams', rows: 6, value: streams })),
    h('button', { type: 'submit' }, 'Save permissions')],
  async v => {
    let parsed;
    try { parsed = JSON.parse(v.streams || '{}'); } catch (err) { throw new Error(`per-stream permissions: ${err.message}`); }
    const global = Object.fromEntries(GLOBAL.map(f => [f, v[f]]));
    await ctx.api.put(`/users/${seg(user.id)}/permissions`, { permissions: { global, streams: Object.keys(parsed).length ? parsed : null } });
    ctx.go(location.hash);
  });
}
