// The reference Durable Streams server (@durable-streams/server), in
// memory or file-backed (`node server.mjs <dataDir>`), on a free port; it
// prints "listening on <url>" once it serves. For benches/ds.rs.
import { DurableStreamTestServer } from '@durable-streams/server';

const dataDir = process.argv[2];
const server = new DurableStreamTestServer({ port: 0, host: '127.0.0.1', dataDir, compression: false });
const url = await server.start();
console.log(`listening on ${url}`);
process.on('SIGTERM', async () => {
  await server.stop();
  process.exit(0);
});
