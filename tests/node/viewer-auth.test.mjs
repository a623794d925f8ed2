// The viewer with auth on: a token in the page URL goes to the client
// library, which sends it as a bearer header on the one multiplexed stream,
// the session index and the approve request (it reads SSE through fetch, so
// the token never goes in a URL); without one, both streams are refused and
// the page says so.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { existsSync } from 'node:fs';
import { startServer } from './lib/server.mjs';
import { CHROMIUM, NO_CHROMIUM, launchChromium } from './lib/browser.mjs';

const SECRET = 'viewer-test-secret';
const T = 15000;

/** An HS256 JWT, signed here with node:crypto. */
function jwt(claims) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const body = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(claims)}`;
  return `${body}.${createHmac('sha256', SECRET).update(body).digest('base64url')}`;
}

let server;
let browser;

before(async () => {
  if (!existsSync(CHROMIUM)) return;
  server = await startServer([], { PROJECTOR_AUTH__MODE: 'jwt', PROJECTOR_AUTH__HS256_SECRET: SECRET });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

test('viewer: a token in the page URL authorises the stream and the controls', async (t) => {
  if (!browser) return t.skip(NO_CHROMIUM);
  const exp = Math.floor(Date.now() / 1000) + 600;
  const writer = jwt({ sub: 'runtime', exp, sessions: ['*'], scope: 'publish' });
  const viewer = jwt({ sub: 'ana', exp, sessions: ['auth-demo'], scope: 'subscribe control' });
  const r = await fetch(`${server.base}/v1/sessions/auth-demo/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${writer}` },
    body: JSON.stringify([
      { type: 'run.started', runId: 'r1', turnId: 't1' },
      { type: 'text.delta', runId: 'r1', turnId: 't1', payload: { delta: 'Authorised text.' } },
      { type: 'action.required', runId: 'r1', turnId: 't1', actionId: 'a1', payload: { actionType: 'tool_approval' } },
    ]),
  });
  assert.equal(r.status, 200);

  const page = await browser.newPage();
  const seen = [];
  page.on('request', (req) => seen.push(req));
  await page.goto(`${server.base}/?session=auth-demo&access_token=${viewer}`);
  await page.getByText('Authorised text.').waitFor({ timeout: T });
  const stream = seen.find((req) => req.url().includes('/v1/streams?'));
  assert.equal(stream.headers()['authorization'], `Bearer ${viewer}`, 'the stream carries the token');
  assert.ok(!stream.url().includes(viewer), 'the token is not in the stream URL');
  const index = seen.find((req) => req.url().endsWith('/v1/sessions/stream'));
  assert.equal(index.headers()['authorization'], `Bearer ${viewer}`, 'the index carries the token');
  // The index lists what the token may read.
  await page.locator('[data-testid=session-item][data-session-id="auth-demo"]').waitFor({ timeout: T });
  assert.equal(await page.getByTestId('session-item').count(), 1);

  const approve = page.locator('[data-testid="approve"]').first();
  await approve.click();
  const sent = seen.find((req) => req.url().includes('/actions/a1'));
  await page.waitForFunction(() => document.body.innerText.includes('409'), null, { timeout: T });
  assert.equal(sent.headers()['authorization'], `Bearer ${viewer}`, 'controls carry the bearer token');
  await page.close();

  // Without a token the stream is refused: the page never shows the text,
  // and says why.
  const bare = await browser.newPage();
  const refused = bare.waitForResponse((res) => res.url().includes('/v1/streams?'), { timeout: T });
  await bare.goto(`${server.base}/?session=auth-demo`);
  assert.equal((await refused).status(), 401);
  await bare.waitForFunction(() => document.querySelector('[data-testid=connection]')?.dataset.state === 'offline', null, { timeout: T });
  await bare.waitForFunction(() => /refused \(401/.test(document.querySelector('[data-testid=banner]')?.textContent ?? ''), null, { timeout: T });
  await bare.waitForFunction(() => /Sessions unavailable \(401/.test(document.querySelector('[data-testid=session-list-status]')?.textContent ?? ''), null, { timeout: T });
  assert.equal(await bare.getByText('Authorised text.').count(), 0);
  await bare.close();
});
