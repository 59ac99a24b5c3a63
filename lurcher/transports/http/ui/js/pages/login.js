// Sign in with a username and password or with a personal access token.

import { h, form, field, input, button } from '../dom.js';

export function render(ctx, onSignedIn) {
  let usePat = false;
  const credentials = h('div', null,
    field('Username', input('username', { id: 'login-username', autocomplete: 'username' })),
    field('Password', input('password', { id: 'login-password', type: 'password', autocomplete: 'current-password' })));
  const pat = h('div', { hidden: true },
    field('Personal access token', input('token', { id: 'login-token', type: 'password', autocomplete: 'off' })));
  const toggle = button('Use a personal access token instead', () => {
    usePat = !usePat;
    credentials.hidden = usePat;
    pat.hidden = !usePat;
    toggle.textContent = usePat ? 'Use username and password instead' : 'Use a personal access token instead';
  }, { class: 'link', id: 'login-toggle' });
  const el = form({ id: 'login-form' }, [credentials, pat,
    h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'login-submit' }, 'Sign in'), toggle)],
  async v => {
    if (usePat) await ctx.api.signInWithToken(v.token);
    else await ctx.api.signIn(v.username, v.password);
    await onSignedIn();
  });
  return h('section', { class: 'login' }, h('h1', null, 'Sign in to lurcher'), el);
}
