// The dashboard's router: #/ (collections), #/c/ID (one collection), #/new (create); the sign-in
// form whenever there is no token or the server refuses it (401/403 with its message).
import { el } from './format.js';
import { token } from './api.js';
import * as signin from './views/signin.js';
import * as list from './views/list.js';
import * as collection from './views/collection.js';
import * as create from './views/create.js';

const main = document.getElementById('main');
const banner = document.getElementById('banner');
let cleanup = null;

function showError(e) {
  banner.replaceChildren(el('p', { class: 'error', role: 'alert', id: 'api-error', text: `${e.status ? `${e.status}: ` : ''}${e.serverMessage ?? e.message}` }));
  if (e.status === 401) { token.clear(); route(); }
}

function route() {
  cleanup?.();
  cleanup = null;
  const hash = location.hash || '#/';
  document.getElementById('signout').hidden = !token.get();
  if (!token.get()) return signin.render(main, { next: () => { banner.replaceChildren(); route(); } });
  const m = /^#\/c\/(.+)$/.exec(hash);
  if (m) cleanup = collection.render(main, { id: decodeURIComponent(m[1]), onError: showError });
  else if (hash === '#/new') create.render(main, { created: (id) => { location.hash = `#/c/${encodeURIComponent(id)}`; } });
  else list.render(main, { onError: showError });
  main.focus({ preventScroll: true });
}

document.getElementById('signout').addEventListener('click', () => { token.clear(); banner.replaceChildren(); route(); });
window.addEventListener('hashchange', () => { banner.replaceChildren(); route(); });
route();
