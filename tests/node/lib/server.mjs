// Start the real agent-projector binary for a test file, and small helpers
// to talk to it. The binary is the one `cargo test` builds
// (target/debug/agent-projector); set PROJECTOR_BIN to use another.
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const BIN = process.env.PROJECTOR_BIN ?? path.join(root, 'target/debug/agent-projector');
export const ROOT = root;

/** Start a server (memory store and port 0 unless `args` name others); resolves once it logs its address. */
export async function startServer(args = [], env = {}) {
  const store = args.includes('--store') ? [] : ['--store', 'memory'];
  const listen = args.includes('--listen') ? [] : ['--listen', '127.0.0.1:0'];
  const child = spawn(BIN, [...store, ...listen, ...args], {
    env: { ...process.env, NO_COLOR: '1', RUST_LOG: 'warn,agent_projector=info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines = createInterface({ input: child.stdout });
  const errLines = [];
  createInterface({ input: child.stderr }).on('line', (l) => errLines.push(l));
  const base = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${errLines.join('\n')}`)), 20000);
    lines.on('line', (line) => {
      const m = line.match(/listening on (http:\/\/[0-9.:]+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.once('exit', (code) => reject(new Error(`server exited with ${code}: ${errLines.join('\n')}`)));
  });
  return {
    base,
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await once(child, 'exit');
      }
    },
  };
}

/** POST events (an array or one object) to a session; returns the parsed reply. */
export async function post(base, session, events) {
  const r = await fetch(`${base}/v1/sessions/${encodeURIComponent(session)}/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(events),
  });
  const body = await r.json();
  if (r.status !== 200) throw new Error(`POST ${session}: ${r.status} ${JSON.stringify(body)}`);
  return body;
}

/** The session snapshot frame. */
export async function snapshot(base, session) {
  const r = await fetch(`${base}/v1/sessions/${encodeURIComponent(session)}/snapshot`);
  if (r.status !== 200) throw new Error(`snapshot ${session}: ${r.status}`);
  return r.json();
}

/** Drop keys whose value is undefined (the AI SDK leaves `input: undefined` etc.). */
export function plain(v) {
  return JSON.parse(JSON.stringify(v));
}

/**
 * Remove every key of a Redis key prefix (sessions and the tagged global
 * indexes) with redis-cli, which comes with redis-server. Best effort.
 */
export function purgeRedisPrefix(url, prefix) {
  const script = "local n = 0 for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) n = n + 1 end return n";
  for (const pattern of [`${prefix}:*`, `{${prefix}}:*`]) {
    try {
      execFileSync('redis-cli', ['-u', url, 'EVAL', script, '0', pattern], { stdio: 'ignore' });
    } catch (e) {
      console.warn(`keys of ${prefix} left in Redis: ${e.message}`);
      return;
    }
  }
}
