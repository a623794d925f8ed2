// AG-UI helpers of the Node suites: an `@ag-ui/client` agent that follows a
// session through agent-projector's AG-UI stream, and messages compared by
// what they say.
import { EventType } from '@ag-ui/core';
import { EventSchemas } from '@ag-ui/core/schemas';
import { AbstractAgent, runHttpRequest, transformHttpEventStream } from '@ag-ui/client';
import { takeWhile, tap } from 'rxjs/operators';

/** An AG-UI agent that follows a session through agent-projector until its run ends. */
export class Follow extends AbstractAgent {
  constructor(base, sid, options = {}) {
    super({ threadId: sid });
    this.url = `${base}/v1/sessions/${sid}/ag-ui`;
    this.options = options;
    this.seen = [];
  }

  run() {
    const headers = this.options.lastEventId ? { 'last-event-id': this.options.lastEventId } : {};
    const ctl = new AbortController();
    this.abort = () => ctl.abort();
    return transformHttpEventStream(runHttpRequest(() => fetch(this.url, { headers, signal: ctl.signal }))).pipe(
      tap((e) => {
        EventSchemas.parse(e);
        this.seen.push(e);
        this.options.onEvent?.(e, this);
      }),
      // Until a run ends (`options.runId`: that run).
      takeWhile((e) => !((e.type === EventType.RUN_FINISHED || e.type === EventType.RUN_ERROR)
        && (!this.options.runId || e.runId === this.options.runId)), true),
    );
  }
}

/** AG-UI's messages compared by what they say (ids, roles, text, calls, results). */
export const said = (ms) => ms.map((m) => {
  const x = { id: m.id, role: m.role, content: m.content };
  if (m.toolCalls) x.toolCalls = m.toolCalls.map((c) => ({ id: c.id, name: c.function.name, args: JSON.parse(c.function.arguments) }));
  if (m.role === 'tool') x.toolCallId = m.toolCallId;
  return x;
});

