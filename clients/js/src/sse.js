// @agent-projector/client: Server-Sent Events over fetch.
//
// Owns reading a `text/event-stream` response body (a WHATWG ReadableStream
// of bytes, as `fetch` gives it in browsers and Node 20) into events, by the
// HTML standard's parsing rules: lines end with CRLF, LF or CR; `data` lines
// join with LF; comments (`: keep-alive`) are reported as activity only; an
// event is dispatched at a blank line; a trailing event without its blank
// line is dropped. Unlike EventSource it works with any `fetch`, so a client
// can send `Authorization` headers and choose its own reconnection.

/**
 * Read SSE events from a byte stream.
 * @param {ReadableStream<Uint8Array>} body
 * @param {{ onActivity?: () => void, onRetry?: (ms: number) => void }} [opts] `onActivity`
 *   for every chunk of bytes (comments included); `onRetry` for each `retry:` field
 * @returns {AsyncGenerator<{ event: string, data: string, id: string | undefined, retry: number | undefined }>}
 */
export async function* readSSE(body, opts = {}) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  let event = '';
  let data = [];
  let id;
  let retry;
  let sawData = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      if (opts.onActivity) opts.onActivity();
      buf += decoder.decode(value, { stream: true });
      let start = 0;
      for (;;) {
        const cr = buf.indexOf('\r', start);
        const lf = buf.indexOf('\n', start);
        let end = cr < 0 ? lf : lf < 0 ? cr : Math.min(cr, lf);
        if (end < 0) break;
        // A CR at the very end may be the first half of a CRLF: wait for more.
        if (end === cr && end === buf.length - 1) break;
        const line = buf.slice(start, end);
        start = end + (buf[end] === '\r' && buf[end + 1] === '\n' ? 2 : 1);
        if (line === '') {
          if (sawData) yield { event: event || 'message', data: data.join('\n'), id, retry };
          event = ''; data = []; id = undefined; retry = undefined; sawData = false;
          continue;
        }
        if (line[0] === ':') continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? '' : line.slice(colon + 1);
        if (val[0] === ' ') val = val.slice(1);
        if (field === 'event') event = val;
        else if (field === 'data') { data.push(val); sawData = true; }
        else if (field === 'id' && !val.includes('\0')) id = val;
        else if (field === 'retry' && /^\d+$/.test(val)) {
          retry = Number(val);
          if (opts.onRetry) opts.onRetry(retry);
        }
      }
      buf = buf.slice(start);
    }
  } finally {
    // Stop the body when the consumer stops (break, throw or return).
    reader.cancel().catch(() => {});
  }
}
