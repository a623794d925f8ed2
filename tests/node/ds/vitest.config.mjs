// vitest for the Durable Streams conformance suite only (the other Node
// suites run under node --test).
import { fileURLToPath } from 'node:url';

export default {
  test: {
    root: fileURLToPath(new URL('.', import.meta.url)),
    include: ['*.vitest.mjs'],
    testTimeout: 30000,
    hookTimeout: 30000,
  },
};
