// The Durable Streams protocol's own referee: every test of
// @durable-streams/server-conformance-tests, against the server at
// DS_BASE_URL (ds-conformance.test.mjs starts it and runs this file).
import { runConformanceTests } from '@durable-streams/server-conformance-tests';

runConformanceTests({ baseUrl: process.env.DS_BASE_URL, longPollTimeoutMs: Number(process.env.DS_LONG_POLL_MS) });
