// @agent-projector/client: HTTP plumbing shared by the streams and controls.
//
// Owns the options every call takes (`baseUrl`, `token`, `fetch`, `headers`),
// turning them into a URL and request headers, and turning an error answer
// (RFC 9457 `application/problem+json`) into a typed `ProjectorError`.

/** An error answer of the server, or a failure to reach it. */
export class ProjectorError extends Error {
  /**
   * @param {string} message
   * @param {{ status?: number, code?: string, detail?: string, title?: string, type?: string,
   *   errors?: unknown[], body?: unknown, cause?: unknown }} [info]
   */
  constructor(message, info = {}) {
    super(message, info.cause !== undefined ? { cause: info.cause } : undefined);
    this.name = 'ProjectorError';
    /** HTTP status (0 when the server could not be reached). */
    this.status = info.status ?? 0;
    /** The problem's stable `code` (`network_error` when unreachable). */
    this.code = info.code ?? 'unknown';
    this.detail = info.detail ?? '';
    this.title = info.title ?? '';
    this.type = info.type ?? '';
    /** Per-item problems (`errors` of the problem), e.g. where an answer broke its schema. */
    this.errors = Array.isArray(info.errors) ? info.errors : [];
    /** The parsed body, as the server sent it. */
    this.body = info.body;
  }
}

/** Read an error response into a ProjectorError (problem+json or not). */
export async function errorFrom(resp, what) {
  let body;
  let text = '';
  try {
    text = await resp.text();
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = text || undefined;
  }
  const p = body && typeof body === 'object' ? body : {};
  const code = typeof p.code === 'string' ? p.code : `http_${resp.status}`;
  const detail = typeof p.detail === 'string' ? p.detail : typeof body === 'string' ? body : '';
  return new ProjectorError(`${what}: ${resp.status} ${code}${detail ? `: ${detail}` : ''}`, {
    status: resp.status, code, detail, title: p.title, type: p.type, errors: p.errors, body,
  });
}

/** A network failure (fetch threw) as a ProjectorError. */
export function networkError(what, cause) {
  const msg = cause && cause.message ? cause.message : String(cause);
  return new ProjectorError(`${what}: ${msg}`, { code: 'network_error', detail: msg, cause });
}

/** `baseUrl` without a trailing slash ('' for same-origin relative URLs). */
export function normalizeBase(baseUrl) {
  return String(baseUrl ?? '').replace(/\/+$/, '');
}

/**
 * The fetch to use: the option, else the global one, called as a plain
 * function (a browser's `fetch` called as a method of another object throws
 * "Illegal invocation").
 */
export function pickFetch(f) {
  if (f != null && typeof f !== 'function') throw new TypeError('`fetch` must be a function');
  if (!f && typeof globalThis.fetch !== 'function') throw new TypeError('no fetch: pass `fetch` in the options');
  return (input, init) => (f ?? globalThis.fetch)(input, init);
}

/** The token: a string, or a function returning one (or a promise of one), or nothing. */
export async function resolveToken(token) {
  const t = typeof token === 'function' ? await token() : token;
  return t ? String(t) : '';
}

/** Request headers: the caller's, `accept`, and the bearer token when there is one. */
export async function headersFor(opts, accept, extra = {}) {
  const h = { ...(opts.headers || {}), accept, ...extra };
  const t = await resolveToken(opts.token);
  if (t) h.authorization = `Bearer ${t}`;
  return h;
}

/** A random id (requestId of a control): crypto.randomUUID where the context has it. */
export function randomId() {
  const c = globalThis.crypto;
  if (c && typeof c.randomUUID === 'function') return c.randomUUID();
  const b = new Uint8Array(16);
  if (c && typeof c.getRandomValues === 'function') c.getRandomValues(b);
  else for (let i = 0; i < 16; i++) b[i] = Math.floor(Math.random() * 256);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

/** `/v1/sessions/<id>` with the id percent-encoded. */
export function sessionPath(sessionId) {
  return `/v1/sessions/${encodeURIComponent(sessionId)}`;
}
