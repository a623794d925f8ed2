// @agent-projector/client: events and async iteration.
//
// Owns the tiny emitter the connection and the index watcher expose
// (`on(type, fn)` returns an unsubscribe function) and the async iterator
// over one event type that ends when the source closes. No EventTarget, so
// it is the same in Node and browsers and listeners get plain values.

export class Emitter {
  constructor() {
    /** @type {Map<string, Set<Function>>} */
    this._handlers = new Map();
  }

  /** Listen to `type`; returns a function that stops listening. */
  on(type, fn) {
    let set = this._handlers.get(type);
    if (!set) this._handlers.set(type, (set = new Set()));
    set.add(fn);
    return () => this.off(type, fn);
  }

  /** Stop listening. */
  off(type, fn) {
    this._handlers.get(type)?.delete(fn);
  }

  /** Call each listener of `type`; one that throws does not stop the others. */
  emit(type, value) {
    const set = this._handlers.get(type);
    if (!set) return;
    for (const fn of [...set]) {
      try {
        fn(value);
      } catch (e) {
        queueMicrotask(() => { throw e; });
      }
    }
  }
}

/**
 * An async iterator over the `type` events of `emitter`, from now on, that
 * ends when `endType` fires (or at once when `isEnded()`). Values wait in a
 * queue until they are read.
 */
export function iterate(emitter, type, endType, isEnded = () => false) {
  const queue = [];
  let wake = null;
  let ended = isEnded();
  const offValue = emitter.on(type, (v) => {
    queue.push(v);
    if (wake) { wake(); wake = null; }
  });
  const offEnd = emitter.on(endType, () => {
    ended = true;
    if (wake) { wake(); wake = null; }
  });
  const stop = () => {
    ended = true;
    offValue();
    offEnd();
  };
  if (ended) stop();
  return {
    async next() {
      for (;;) {
        if (queue.length) return { value: queue.shift(), done: false };
        if (ended) { stop(); return { value: undefined, done: true }; }
        await new Promise((r) => (wake = r));
      }
    },
    async return() {
      stop();
      queue.length = 0;
      if (wake) { wake(); wake = null; }
      return { value: undefined, done: true };
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}
