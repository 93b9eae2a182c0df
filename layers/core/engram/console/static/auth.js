// Sign-in. The token lives in sessionStorage only (gone with the tab; never localStorage) and is
// sent only to this origin's /api/ (api.js). Three ways in, chosen by the stack (/console/config.json):
//   dev            the local stack: a user name, sent as `Bearer dev-<user>`;
//   managed-login  the created Cognito user pool: authorization code + PKCE in the browser;
//   token          an external issuer (AuthIssuer): the person pastes an access token.

const TOKEN = 'engram.token';
const USER = 'engram.user';
const EXPIRES = 'engram.expires';
const PKCE = 'engram.pkce';
const DEV_USER = /^[A-Za-z0-9_-]{1,64}$/;

let config = null;

export async function loadConfig() {
  if (config) return config;
  const res = await fetch('/console/config.json', { credentials: 'omit' });
  if (!res.ok) throw Object.assign(new Error(`the console's settings did not load (${res.status})`), { code: 'config_unavailable' });
  config = await res.json();
  return config;
}

export function token() {
  const expires = Number(sessionStorage.getItem(EXPIRES) || 0);
  if (expires && Date.now() > expires) {
    signOutLocally();
    return null;
  }
  return sessionStorage.getItem(TOKEN);
}

export function user() {
  return sessionStorage.getItem(USER);
}

function keep(accessToken, name, expiresInSeconds) {
  sessionStorage.setItem(TOKEN, accessToken);
  sessionStorage.setItem(USER, name);
  if (expiresInSeconds) sessionStorage.setItem(EXPIRES, String(Date.now() + expiresInSeconds * 1000 - 30_000));
  else sessionStorage.removeItem(EXPIRES);
}

export function signInDev(name) {
  const trimmed = String(name || '').trim();
  if (!DEV_USER.test(trimmed)) {
    throw Object.assign(new Error('a dev user is 1-64 letters, digits, "_" or "-"'), { code: 'invalid_user', field: 'user' });
  }
  keep(`dev-${trimmed}`, trimmed, 0);
}

export function signInWithToken(pasted) {
  const raw = String(pasted || '').trim().replace(/^Bearer\s+/i, '');
  const claims = decodeJwt(raw);
  if (!claims) throw Object.assign(new Error('that is not a JWT access token'), { code: 'invalid_token', field: 'token' });
  const left = claims.exp ? claims.exp - Date.now() / 1000 : 0;
  if (claims.exp && left <= 0) throw Object.assign(new Error('that token has expired'), { code: 'token_expired', field: 'token' });
  keep(raw, claims.email || claims.username || claims['cognito:username'] || claims.sub || 'signed in', left > 0 ? left : 0);
}

function decodeJwt(jwt) {
  const parts = jwt.split('.');
  if (parts.length !== 3) return null;
  try {
    const text = atob(parts[1].replace(/-/g, '+').replace(/_/g, '/').padEnd(Math.ceil(parts[1].length / 4) * 4, '='));
    return JSON.parse(decodeURIComponent(Array.from(text, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`).join('')));
  } catch {
    return null;
  }
}

function base64url(bytes) {
  let text = '';
  for (const b of new Uint8Array(bytes)) text += String.fromCharCode(b);
  return btoa(text).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function redirectUri() {
  return `${location.origin}/`;
}

// Managed login, step 1: off to the user pool's login page with a PKCE challenge.
export async function startManagedLogin() {
  const verifier = base64url(crypto.getRandomValues(new Uint8Array(32)));
  const state = base64url(crypto.getRandomValues(new Uint8Array(16)));
  const challenge = base64url(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
  sessionStorage.setItem(PKCE, JSON.stringify({ verifier, state }));
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: config.clientId,
    redirect_uri: redirectUri(),
    scope: config.scopes,
    state,
    code_challenge_method: 'S256',
    code_challenge: challenge,
  });
  location.assign(`${config.loginUrl}/oauth2/authorize?${query}`);
}

// Managed login, step 2: back with ?code=&state=; the code and the verifier buy the tokens.
export async function finishManagedLogin() {
  const params = new URLSearchParams(location.search);
  if (!params.has('code') && !params.has('error')) return false;
  history.replaceState(null, '', `${location.pathname}${location.hash}`);
  const saved = JSON.parse(sessionStorage.getItem(PKCE) || 'null');
  sessionStorage.removeItem(PKCE);
  if (params.has('error')) {
    throw Object.assign(new Error(params.get('error_description') || params.get('error')), { code: 'sign_in_failed' });
  }
  if (!saved || saved.state !== params.get('state')) {
    throw Object.assign(new Error('the sign-in answer does not match this tab; sign in again'), { code: 'sign_in_failed' });
  }
  const res = await fetch(`${config.loginUrl}/oauth2/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      client_id: config.clientId,
      code: params.get('code'),
      redirect_uri: redirectUri(),
      code_verifier: saved.verifier,
    }),
  });
  const body = await res.json().catch(() => ({}));
  if (!res.ok || !body.access_token) {
    throw Object.assign(new Error(body.error_description || body.error || `the token exchange failed (${res.status})`), { code: 'sign_in_failed' });
  }
  const idClaims = body.id_token ? decodeJwt(body.id_token) : null;
  const claims = decodeJwt(body.access_token) || {};
  keep(body.access_token, (idClaims && idClaims.email) || claims.username || claims.sub || 'signed in', Number(body.expires_in) || 3600);
  return true;
}

function signOutLocally() {
  for (const key of [TOKEN, USER, EXPIRES]) sessionStorage.removeItem(key);
}

export function signOut() {
  signOutLocally();
  if (config && config.signIn === 'managed-login' && config.loginUrl) {
    const query = new URLSearchParams({ client_id: config.clientId, logout_uri: redirectUri() });
    location.assign(`${config.loginUrl}/logout?${query}`);
    return;
  }
  location.hash = '#/';
  location.reload();
}
