// Formatting of sizes, times and message contents (payloads, user headers). Pure functions.

const UNITS = { B: 1, KB: 1e3, MB: 1e6, GB: 1e9, TB: 1e12, PB: 1e15, EB: 1e18,
  KIB: 1024, MIB: 1024 ** 2, GIB: 1024 ** 3, TIB: 1024 ** 4 };
const NEVER = 18446744073709551615n;

// u64::MAX as exact JSON: the API's "never" for an expiry and "unlimited" for a size. Its 0
// means the server's configured default (system.topic), which need not be either.
export const neverJson = () => JSON.rawJSON(String(NEVER));

// "1.234 KB" (the API's exact size strings) or a number -> bytes.
export function parseSize(value) {
  if (typeof value === 'number') return value;
  const match = /^\s*([\d.]+)\s*([A-Za-z]*)\s*$/.exec(String(value || '0'));
  if (!match) return 0;
  return Number(match[1]) * (UNITS[(match[2] || 'B').toUpperCase()] || 1);
}

export function bytes(n) {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i += 1; }
  return `${i ? n.toFixed(2) : Math.round(n)} ${units[i]}`;
}

export function rate(n) {
  return n >= 1000 ? `${(n / 1000).toFixed(1)}k` : n.toFixed(n < 10 ? 1 : 0);
}

export function micros(us) {
  if (!us) return '—';
  return new Date(Number(us) / 1000).toISOString().replace('T', ' ').replace('Z', '');
}

export function duration(us) {
  let s = Math.floor(Number(us) / 1e6);
  const d = Math.floor(s / 86400); s -= d * 86400;
  const hh = Math.floor(s / 3600); s -= hh * 3600;
  const mm = Math.floor(s / 60); s -= mm * 60;
  return `${d ? `${d}d ` : ''}${hh}h ${mm}m ${s}s`;
}

export function expiry(us) {
  if (us === null || us === undefined || us === 0 || BigInt(us) >= NEVER) return 'never';
  return duration(us);
}

export function maxSize(value) {
  const n = parseSize(value);
  return !n || n >= 1.8e19 ? 'unlimited' : bytes(n);
}

// The bytes of base64 `text`, or only its first `limit` bytes (only that much is decoded).
export function fromBase64(text, limit) {
  const raw = atob(limit === undefined ? text || '' : (text || '').slice(0, Math.ceil(limit / 3) * 4)).slice(0, limit);
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i += 1) out[i] = raw.charCodeAt(i);
  return out;
}

export function toBase64(data) {
  let raw = '';
  for (let i = 0; i < data.length; i += 0x8000) {
    raw += String.fromCharCode.apply(null, data.subarray(i, i + 0x8000));
  }
  return btoa(raw);
}

const utf8 = new TextDecoder('utf-8', { fatal: false });
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });
export const encodeText = text => new TextEncoder().encode(text);

export function hex(data, limit = 4096) {
  const parts = [];
  const n = Math.min(data.length, limit);
  for (let i = 0; i < n; i += 1) parts.push(data[i].toString(16).padStart(2, '0'));
  return parts.join(' ') + (data.length > limit ? ' …' : '');
}

// Payload bytes decoded and shown per message: a message may hold 64 MiB, and laying out
// that much text froze the page (minutes for one message of short lines).
export const SHOWN_BYTES = 16384;

// Payload as text in the chosen view: 'json' (pretty, falling back to text), 'text', 'hex'.
// `data` may be the first SHOWN_BYTES of a payload of `size` bytes: a cut payload is shown
// as text (never parsed as JSON) and says how large it is.
export function payloadView(data, view, size = data.length) {
  if (view === 'hex') return hex(data);
  if (size > data.length) return `${utf8.decode(data)} … (${size} bytes, the first ${data.length} shown)`;
  let text;
  try { text = strictUtf8.decode(data); } catch (err) { return view === 'json' ? hex(data) : utf8.decode(data); }
  if (view === 'json') {
    try { return JSON.stringify(JSON.parse(text, asWritten), null, 2); } catch (err) { return text; }
  }
  return text;
}

// JSON view reviver: every number is printed again as written in the payload. Parsed to a
// double, 12345678901234567890 showed as 12345678901234567000, 9007199254740993 as
// ...992 and 1.50 as 1.5, so the page showed values the message does not hold.
function asWritten(key, value, context) {
  return typeof value === 'number' && context && context.source ? JSON.rawJSON(context.source) : value;
}

// kind: [size, read(view, offset), write(view, offset, value), parse(text) -> value]. parse
// refuses what the kind cannot hold: DataView's setters wrote 0 for "3x" or "yes" and
// wrapped 300 to 44 in an int8, so the header sent was not the one typed.
const int = (bits, signed) => text => Number(wholeNumber(text, bits, signed));
const big = (bits, signed) => text => wholeNumber(text, bits, signed);
const FIXED = {
  bool: [1, (v, o) => v.getUint8(o) !== 0, (v, o, x) => v.setUint8(o, x ? 1 : 0), flag],
  int8: [1, (v, o) => v.getInt8(o), (v, o, x) => v.setInt8(o, x), int(8, true)],
  int16: [2, (v, o) => v.getInt16(o, true), (v, o, x) => v.setInt16(o, x, true), int(16, true)],
  int32: [4, (v, o) => v.getInt32(o, true), (v, o, x) => v.setInt32(o, x, true), int(32, true)],
  int64: [8, (v, o) => v.getBigInt64(o, true), (v, o, x) => v.setBigInt64(o, x, true), big(64, true)],
  uint8: [1, (v, o) => v.getUint8(o), (v, o, x) => v.setUint8(o, x), int(8, false)],
  uint16: [2, (v, o) => v.getUint16(o, true), (v, o, x) => v.setUint16(o, x, true), int(16, false)],
  uint32: [4, (v, o) => v.getUint32(o, true), (v, o, x) => v.setUint32(o, x, true), int(32, false)],
  uint64: [8, (v, o) => v.getBigUint64(o, true), (v, o, x) => v.setBigUint64(o, x, true), big(64, false)],
  float32: [4, (v, o) => v.getFloat32(o, true), (v, o, x) => v.setFloat32(o, x, true), decimal],
  float64: [8, (v, o) => v.getFloat64(o, true), (v, o, x) => v.setFloat64(o, x, true), decimal],
};
export const HEADER_KINDS = ['string', ...Object.keys(FIXED), 'raw'];

// One header field {kind, value(base64)} -> display text.
export function headerValue(field) {
  const data = fromBase64(field.value);
  if (field.kind === 'string') return utf8.decode(data);
  const fixed = FIXED[field.kind];
  if (fixed && data.length === fixed[0]) return String(fixed[1](new DataView(data.buffer), 0));
  if (field.kind === 'int128' || field.kind === 'uint128') return `0x${[...data].reverse().map(b => b.toString(16).padStart(2, '0')).join('')}`;
  return hex(data);
}

// Header lines shown per message: a message's 100,000-byte header block holds up to about
// 7,000 headers, and a poll of 167 such messages built 1.2 million lines (4.7 s frozen).
export const SHOWN_HEADERS = 50;

export function headerLines(userHeaders) {
  if (!userHeaders || !userHeaders.length) return [];
  if (typeof userHeaders === 'string') return [`(undecodable block, ${fromBase64(userHeaders).length} bytes)`];
  const lines = userHeaders.slice(0, SHOWN_HEADERS).map(e => `${headerValue(e.key)} (${e.value.kind}) = ${headerValue(e.value)}`);
  const more = userHeaders.length - lines.length;
  return more > 0 ? [...lines, `… ${more} more headers (${userHeaders.length} in all)`] : lines;
}

// Form text "key=value" or "key:kind=value" per line -> the API's user_headers entries.
export function parseHeaderLines(text) {
  const entries = [];
  for (const line of String(text || '').split('\n')) {
    if (!line.trim()) continue;
    const eq = line.indexOf('=');
    if (eq < 1) throw new Error(`header line needs key=value: ${line}`);
    let key = line.slice(0, eq).trim();
    let kind = 'string';
    const colon = key.lastIndexOf(':');
    if (colon > 0 && HEADER_KINDS.includes(key.slice(colon + 1))) { kind = key.slice(colon + 1); key = key.slice(0, colon); }
    entries.push({ key: { kind: 'string', value: toBase64(encodeText(key)) },
      value: { kind, value: toBase64(encodeHeader(kind, line.slice(eq + 1))) } });
  }
  return entries;
}

function encodeHeader(kind, text) {
  if (kind === 'string') return encodeText(text);
  if (kind === 'raw') return fromHex(text);
  const [size, , write, parse] = FIXED[kind];
  const out = new Uint8Array(size);
  try {
    write(new DataView(out.buffer), 0, parse(text.trim()));
  } catch (err) {
    throw new Error(`header value for ${kind}: ${err.message}`);
  }
  return out;
}

// A whole number in decimal that fits `bits` (signed or not), as a BigInt; else an Error.
export function wholeNumber(text, bits, signed) {
  if (!/^[+-]?\d+$/.test(text)) throw new Error(`not a whole number: "${text}"`);
  const value = BigInt(text);
  const top = 1n << BigInt(signed ? bits - 1 : bits);
  const [low, high] = signed ? [-top, top - 1n] : [0n, top - 1n];
  if (value < low || value > high) throw new Error(`${text} is outside ${low}…${high}`);
  return value;
}

function flag(text) {
  if (/^(true|1)$/i.test(text)) return true;
  if (/^(false|0)$/i.test(text)) return false;
  throw new Error(`not true, false, 1 or 0: "${text}"`);
}

function decimal(text) {
  const value = Number(text);
  if (text === '' || (Number.isNaN(value) && text !== 'NaN')) throw new Error(`not a number: "${text}"`);
  return value;
}

function fromHex(text) {
  const clean = text.replace(/\s+/g, '');
  if (!/^([0-9a-fA-F]{2})*$/.test(clean)) throw new Error('raw header value must be hex');
  return new Uint8Array(clean.match(/../g) ? clean.match(/../g).map(b => parseInt(b, 16)) : []);
}
