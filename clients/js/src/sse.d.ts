// Types of sse.js: Server-Sent Events over a fetch body.
export interface SSEEvent {
  event: string;
  data: string;
  /** The event's own `id` field, when it had one. */
  id: string | undefined;
  retry: number | undefined;
}

export declare function readSSE(
  body: ReadableStream<Uint8Array>,
  opts?: { onActivity?: () => void; onRetry?: (ms: number) => void },
): AsyncGenerator<SSEEvent, void, undefined>;
