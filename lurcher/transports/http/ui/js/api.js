// The REST API client of the console. The access token lives in sessionStorage (this tab,
// this origin only; never localStorage or cookies) and goes out as an Authorization bearer
// header, so no request is authorised by anything a browser attaches on its own: a
// cross-site page cannot make an authenticated request (no CSRF surface). At most
// MAX_IN_FLIGHT requests are out at once; the others wait their turn in order, and those
// still waiting when the page is left or the user signs out are dropped (never sent).

const TOKEN_KEY = 'lurcher.console.token';
const USER_KEY = 'lurcher.console.user';

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
    sessionStorage.setItem(TOKEN_KEY, reply.access_token.token);
    sessionStorage.setItem(USER_KEY, String(reply.user_id));
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

  // One request; a queued one whose session ended meanwhile is not sent.
  async send(method, path, body, authorised) {
    if (authorised && !this.signedIn) throw new ApiError(401, 'Signed out');
    const headers = {};
    if (authorised) headers.Authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const response = await reach(path, {
      method, headers, credentials: 'omit', cache: 'no-store', redirect: 'error',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (response.status === 401 && authorised) {
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
