// @agent-projector/client: the package entry point.
//
// Owns the public surface: `connect` (many sessions on one multiplexed
// connection), `watchIndex` (the live session index), the controls
// (`approve`, `reject`, `answer`, `cancel`, `send`), `createClient` (all of
// them bound to one server and token), and the pure projection core for
// those who bring their own transport.

import { connect } from './connection.js';
import { createControls } from './controls.js';
import { watchIndex } from './session-index.js';

export { Connection, connect, parsePositions } from './connection.js';
export { SessionIndex, watchIndex } from './session-index.js';
export { createControls } from './controls.js';
export { ProjectorError } from './http.js';
export { DEFAULT_BACKOFF, backoffDelay } from './stream.js';
export { readSSE } from './sse.js';
export {
  DEFAULT_LIMITS, SURFACE_MAPS, SessionProjection, applyDelta, emptyState, normalizeState,
} from './projection.js';

/**
 * Everything bound to one server and token:
 * `client.connect(sessions, more?)`, `client.watchIndex(more?)`, the controls
 * and `client.snapshot(id)`.
 */
export function createClient(opts = {}) {
  const controls = createControls(opts);
  return {
    ...controls,
    connect: (sessions, more = {}) => connect({ ...opts, ...more, sessions }),
    watchIndex: (more = {}) => watchIndex({ ...opts, ...more }),
  };
}
