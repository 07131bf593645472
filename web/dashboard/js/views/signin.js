// Sign in: an admin or per-collection analyst token, checked with GET /v1/collections and kept
// in sessionStorage (this tab only). A 401/403 shows the server's message.
import { el } from '../format.js';
import { token, listCollections } from '../api.js';

export function render(main, { next }) {
  const input = el('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false' });
  const msg = el('p', { id: 'signin-error', class: 'error', role: 'alert' });
  const form = el('form', { id: 'signin', 'aria-describedby': 'signin-help' },
    el('h2', { text: 'Sign in' }),
    el('p', { id: 'signin-help', text: 'An admin token (harmony serve --admin-token) or a collection\'s analyst token (harmony collection token create). It is kept in this tab\'s session storage only.' }),
    el('label', { for: 'token', text: 'Token' }), input,
    el('button', { type: 'submit', text: 'Sign in' }), msg);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    msg.textContent = '';
    try {
      await listCollections({ bearer: input.value });
      token.set(input.value);
      next();
    } catch (err) {
      msg.textContent = `${err.status ? `${err.status}: ` : ''}${err.serverMessage ?? err.message}`;
    }
  });
  main.replaceChildren(form);
  input.focus();
}
