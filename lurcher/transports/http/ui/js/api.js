// The REST API client of the console. The access token lives in sessionStorage (this tab,
// this origin only; never localStorage or cookies) and goes out as an Authorization bearer
// header, so no request is authorised by anything a browser attaches on its own: a
// cross-site page cannot make an authenticated request (no CSRF surface). At most
// MAX_IN_FLIGHT requests are out at once; the others wait their turn in order, and those
// still waiting when the page is left or the user signs out are dropped (never sent).
// A token past half its lifetime is exchanged for a new one (POST /users/refresh-token,
// which revokes the old one) before the next request, so a console in use is never signed
// out by its token's expiry (an hour by default); a request sent with the old token that the
// exchange revoked is sent again with the new one.

const TOKEN_KEY = 'lurcher.console.token';
const USER_KEY = 'lurcher.console.user';
const REFRESH_AT_KEY = 'lurcher.console.refresh_at'; // Date.now() ms past which to refresh
const REFRESH_RETRY_MS = 30000; // after a refused or failed refresh: the old token serves on

// A page asking one request per partition (consumer-group lag: groups x partitions) started
// 3,000 fetches at once for a topic of 1,000 partitions and 3 groups, and Chromium failed
// them ("Failed to fetch": too many pending requests); it sends 6 at a time to one host.
const MAX_IN_FLIGHT = 6;

class Slots {
  constructor(count) {
    this.free = count;
    this.waiting = []; // [resolve, reject] of each request waiting for a slot, in order
  }

  async take() {
    if (this.free > 0) this.free -= 1;
    else await new Promise((resolve, reject) => this.waiting.push([resolve, reject]));
  }

  give() {
    const next = this.waiting.shift();
    if (next) next[0](); else this.free += 1;
  }

  // Fails every waiting request: a page left behind must not hold the next one's requests
  // (or a sign-out) behind thousands of its own.
  drop(error) {
    const dropped = this.waiting;
    this.waiting = [];
    for (const [, reject] of dropped) reject(error);
  }
}

export class ApiError extends Error {
  constructor(status, reason, code) {
    super(reason || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

export class Api {
  constructor(onSignedOut) {
    this.onSignedOut = onSignedOut;
    this.slots = new Slots(MAX_IN_FLIGHT);
  }

  get token() { return sessionStorage.getItem(TOKEN_KEY); }
  get userId() { return Number(sessionStorage.getItem(USER_KEY)); }
  get signedIn() { return Boolean(this.token); }

  async signIn(username, password) {
    const reply = await this.request('POST', '/users/login', { username, password }, false);
    this.keep(reply);
  }

  async signInWithToken(token) {
    const reply = await this.request('POST', '/personal-access-tokens/login', { token }, false);
    this.keep(reply);
  }

  keep(reply) {
    const token = reply.access_token.token;
    sessionStorage.setItem(TOKEN_KEY, token);
    sessionStorage.setItem(USER_KEY, String(reply.user_id));
    sessionStorage.setItem(REFRESH_AT_KEY, String(Date.now() + halfLifeMs(token)));
  }

  // Waits for a refresh of the token when it is due (one at a time, shared by all requests).
  async fresh() {
    if (!this.signedIn) return;
    if (!(Date.now() >= Number(sessionStorage.getItem(REFRESH_AT_KEY)))) return;
    if (!this.refreshing) {
      this.refreshing = this.refresh().finally(() => { this.refreshing = null; });
    }
    await this.refreshing;
  }

  // Outside the request slots, so a page's full slots never hold it up.
  async refresh() {
    const old = this.token;
    sessionStorage.setItem(REFRESH_AT_KEY, String(Date.now() + REFRESH_RETRY_MS));
    let response;
    try {
      response = await reach('/users/refresh-token', {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, credentials: 'omit',
        cache: 'no-store', redirect: 'error', body: JSON.stringify({ token: old }),
      });
    } catch (err) {
      return; // no answer: the old token serves until it expires
    }
    if (!response.ok || this.token !== old) return; // refused, or signed out/in meanwhile
    this.keep(await response.json());
  }

  // Requests of the page being left that wait for a slot are not sent.
  dropQueued() {
    this.slots.drop(new ApiError(0, 'Not sent: the page was left'));
  }

  async signOut() {
    this.dropQueued();
    if (this.signedIn) {
      try { await this.request('DELETE', '/users/logout'); } catch (err) { /* token already gone */ }
    }
    this.forget();
  }

  forget() {
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem(USER_KEY);
    sessionStorage.removeItem(REFRESH_AT_KEY);
  }

  get(path) { return this.request('GET', path); }
  post(path, body) { return this.request('POST', path, body || {}); }
  put(path, body) { return this.request('PUT', path, body || {}); }
  del(path) { return this.request('DELETE', path); }

  async request(method, path, body, authorised = true) {
    await this.slots.take();
    try {
      return await this.send(method, path, body, authorised);
    } finally {
      this.slots.give();
    }
  }

  // One request; a queued one whose session ended meanwhile is not sent. retried: sent
  // again because a refresh revoked the token it went out with.
  async send(method, path, body, authorised, retried = false) {
    if (authorised) await this.fresh();
    if (authorised && !this.signedIn) throw new ApiError(401, 'Signed out');
    const used = this.token;
    const headers = {};
    if (authorised) headers.Authorization = `Bearer ${used}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const response = await reach(path, {
      method, headers, credentials: 'omit', cache: 'no-store', redirect: 'error',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (response.status === 401 && authorised) {
      if (this.refreshing) await this.refreshing;
      if (!retried && this.signedIn && this.token !== used) {
        return this.send(method, path, body, authorised, true);
      }
      this.forget();
      this.onSignedOut();
      throw new ApiError(401, 'Signed out: the session expired or was revoked');
    }
    if (!response.ok) throw await failure(response);
    const text = await response.text();
    return text ? parseJson(text) : null;
  }

  // Prometheus text (unauthenticated); null when metrics are off.
  async metrics() {
    const response = await reach('/metrics', { credentials: 'omit', cache: 'no-store' });
    return response.ok ? response.text() : null;
  }
}

// Half the lifetime the server gave the token (its claims' exp - iat, both the server's
// clock, so the browser's clock may be off), in ms; Infinity when the token does not say.
function halfLifeMs(token) {
  try {
    const claims = JSON.parse(atob(token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/')));
    const life = Number(claims.exp) - Number(claims.iat);
    return life > 0 ? life * 500 : Infinity;
  } catch (err) {
    return Infinity;
  }
}

// JSON with integers beyond 2^53 (128-bit message ids, u64::MAX "never") kept exact as
// their decimal text, where the browser gives the parser the source.
export function parseJson(text) {
  return JSON.parse(text, (key, value, context) =>
    (typeof value === 'number' && !Number.isSafeInteger(value) && Number.isInteger(value) && context && context.source
      ? context.source : value));
}

// fetch, whose failure to get any answer (server down, network gone) the browser reports
// only as "Failed to fetch": the console says what happened and what to do.
const UNREACHABLE = 'Cannot reach the server: no answer (it is down, or the network is); try again or reload the page';

async function reach(path, options) {
  try {
    return await fetch(path, options);
  } catch (err) {
    throw new ApiError(0, UNREACHABLE);
  }
}

async function failure(response) {
  let reason = `HTTP ${response.status}`;
  let code;
  try {
    const body = await response.json();
    if (body && body.reason) reason = `${body.reason}${body.field ? ` (${body.field})` : ''}`;
    code = body && body.code;
  } catch (err) { /* not JSON */ }
  if (response.status === 403) reason = `Not allowed: ${reason}`;
  return new ApiError(response.status, reason, code);
}

// Path pieces for ids typed or read from data.
export const seg = value => encodeURIComponent(String(value));

export function topicPath(sid, tid) {
  return `/streams/${seg(sid)}/topics/${seg(tid)}`;
}
