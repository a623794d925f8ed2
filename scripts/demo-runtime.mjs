#!/usr/bin/env node
// A tiny stand-in for an agent runtime, for scripts/demo.sh: it takes the
// decisions the viewer's Approve / Reject buttons send (relayed by
// agent-projector, signed with controls.signing_secret) and answers them the
// way a real runtime does, with its own `action.resolved` event, so that the
// buttons work end to end. Node's standard library only.
//
//   node scripts/demo-runtime.mjs PORT PROJECTOR_BASE_URL SIGNING_SECRET
//
// Prints "demo runtime listening on http://127.0.0.1:PORT" once ready.
import { createServer } from 'node:http';
import { createHmac, timingSafeEqual } from 'node:crypto';

const [port, base, secret] = process.argv.slice(2);
if (!port || !base || !secret) {
  console.error('usage: demo-runtime.mjs PORT PROJECTOR_BASE_URL SIGNING_SECRET');
  process.exit(2);
}
let sequence = 10_000;

/** The relay's signature: sha256=HMAC(secret, "{timestamp}.{body}"). */
function signed(req, body) {
  const ts = req.headers['x-projector-timestamp'] ?? '';
  const sig = String(req.headers['x-projector-signature'] ?? '');
  const want = 'sha256=' + createHmac('sha256', secret).update(`${ts}.`).update(body).digest('hex');
  return sig.length === want.length && timingSafeEqual(Buffer.from(sig), Buffer.from(want));
}

async function resolve(decision) {
  const outcome = decision.decision === 'approve' ? 'approved' : decision.decision === 'reject' ? 'rejected' : 'answered';
  const event = {
    id: `runtime-${decision.idempotencyKey}`,
    type: 'action.resolved',
    actionId: decision.actionId,
    sequence: ++sequence,
    payload: { decision: decision.decision, outcome, ...(decision.answer ? { answer: decision.answer } : {}) },
  };
  const r = await fetch(`${base}/v1/sessions/${encodeURIComponent(decision.sessionId)}/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(event),
  });
  if (!r.ok) throw new Error(`posting action.resolved: ${r.status} ${await r.text()}`);
}

createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    const body = Buffer.concat(chunks);
    if (req.method !== 'POST' || !signed(req, body)) {
      res.writeHead(401).end();
      return;
    }
    try {
      const msg = JSON.parse(body);
      if (msg.kind === 'action') await resolve(msg);
      console.log(`demo runtime: ${msg.kind} ${msg.decision ?? msg.type ?? ''} ${msg.actionId ?? ''}`.trim());
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    } catch (e) {
      console.error(`demo runtime: ${e.message}`);
      res.writeHead(500).end();
    }
  });
}).listen(Number(port), '127.0.0.1', () => {
  console.log(`demo runtime listening on http://127.0.0.1:${port}`);
});
