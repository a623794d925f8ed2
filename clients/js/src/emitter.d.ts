// Types of emitter.js: a tiny typed emitter.
export declare class Emitter<Events extends object = Record<string, unknown>> {
  /** Listen; returns a function that stops listening. */
  on<K extends keyof Events & string>(type: K, fn: (value: Events[K]) => void): () => void;
  off<K extends keyof Events & string>(type: K, fn: (value: Events[K]) => void): void;
  emit<K extends keyof Events & string>(type: K, value: Events[K]): void;
}

export declare function iterate<T>(
  emitter: Emitter<any>, type: string, endType: string, isEnded?: () => boolean,
): AsyncIterableIterator<T>;
