// The OpenAPI document (openapi/openapi.json) as the ecosystem's tools read
// it: Redocly CLI's recommended rules and Spectral's `spectral:oas` ruleset
// report no error and no warning (with the checked-in openapi/redocly.yaml,
// openapi/.redocly.lint-ignore.yaml and openapi/.spectral.yaml); a copy with
// a planted fault is caught, so the lint test can fail; and the TypeScript
// types openapi-typescript generates from it type-check a typed use of three
// routes (openapi-types/calls.ts), which then runs against a server.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { transform } from 'esbuild';
import { startServer, ROOT } from './lib/server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const bin = (name) => path.join(here, 'node_modules/.bin', name);
const OPENAPI = path.join(ROOT, 'openapi/openapi.json');
const REDOCLY_CONFIG = path.join(ROOT, 'openapi/redocly.yaml');
const SPECTRAL_RULESET = path.join(ROOT, 'openapi/.spectral.yaml');

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', cwd: ROOT, maxBuffer: 64 << 20, ...opts });
  if (r.error) throw r.error;
  return r;
}

/** Redocly's problems with `file`, as `{rule, severity, where, message}`. */
function redocly(file) {
  const r = run(bin('redocly'), ['lint', '--config', REDOCLY_CONFIG, '--format=json', file]);
  let out;
  try {
    out = JSON.parse(r.stdout);
  } catch {
    assert.fail(`redocly lint printed no JSON (exit ${r.status}): ${r.stdout}${r.stderr}`);
  }
  const problems = out.problems.map((p) => ({
    rule: p.ruleId, severity: p.severity, where: p.location?.[0]?.pointer, message: p.message,
  }));
  assert.equal(problems.filter((p) => p.severity === 'error').length, out.totals.errors);
  assert.equal(problems.filter((p) => p.severity === 'warn').length, out.totals.warnings);
  return problems;
}

const SPECTRAL_SEVERITY = ['error', 'warn', 'info', 'hint'];

/** Spectral's results for `file`, as `{rule, severity, where, message}`. */
function spectral(file) {
  const r = run(bin('spectral'), ['lint', '--ruleset', SPECTRAL_RULESET, '--format', 'json', file]);
  // Spectral prints the array, then "No results with a severity of 'error' found!" when clean.
  const json = r.stdout.slice(0, r.stdout.lastIndexOf(']') + 1);
  let out;
  try {
    out = JSON.parse(json);
  } catch {
    assert.fail(`spectral lint printed no JSON (exit ${r.status}): ${r.stdout}${r.stderr}`);
  }
  return out.map((p) => ({
    rule: p.code, severity: SPECTRAL_SEVERITY[p.severity], where: p.path.join('.'), message: p.message,
  }));
}

test('redocly lint (recommended): no error, no warning', () => {
  assert.deepEqual(redocly(OPENAPI), []);
});

test('spectral lint (spectral:oas): no error, no warning', () => {
  assert.deepEqual(spectral(OPENAPI), []);
});

test('a planted fault is reported by both linters (the lint tests can fail)', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'openapi-lint-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const doc = JSON.parse(readFileSync(OPENAPI, 'utf8'));
  const op = doc.paths['/v1/sessions/{session_id}/snapshot'].get;
  delete op.security;
  delete op.description;
  doc.components.schemas.EventEnvelope.properties.refIds = { type: 'array' };
  const file = path.join(dir, 'planted.json');
  writeFileSync(file, JSON.stringify(doc, null, 2));
  const r = redocly(file);
  assert.ok(
    r.some((p) => p.rule === 'security-defined' && p.severity === 'error' && p.where === '#/paths/~1v1~1sessions~1{session_id}~1snapshot/get'),
    JSON.stringify(r, null, 1),
  );
  const s = spectral(file);
  assert.ok(
    s.some((p) => p.rule === 'operation-description' && p.severity === 'warn' && p.where === 'paths./v1/sessions/{session_id}/snapshot.get'),
    JSON.stringify(s, null, 1),
  );
  assert.ok(
    s.some((p) => p.rule === 'array-items' && p.severity === 'error' && p.where.endsWith('EventEnvelope.properties.refIds')),
    JSON.stringify(s, null, 1),
  );
});

test('openapi-typescript types: a typed use of three routes type-checks and runs against the server', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'openapi-types-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const gen = run(bin('openapi-typescript'), [OPENAPI, '--output', path.join(dir, 'api.d.ts')]);
  assert.equal(gen.status, 0, `openapi-typescript: ${gen.stdout}${gen.stderr}`);
  for (const f of ['calls.ts', 'tsconfig.json']) copyFileSync(path.join(here, 'openapi-types', f), path.join(dir, f));
  writeFileSync(path.join(dir, 'package.json'), '{"type": "module", "private": true}\n');

  const tsc = run(bin('tsc'), ['-p', path.join(dir, 'tsconfig.json')]);
  assert.equal(tsc.status, 0, `tsc: ${tsc.stdout}${tsc.stderr}`);

  const js = await transform(readFileSync(path.join(dir, 'calls.ts'), 'utf8'), { loader: 'ts', format: 'esm' });
  writeFileSync(path.join(dir, 'calls.mjs'), js.code);
  const { roundTrip } = await import(pathToFileURL(path.join(dir, 'calls.mjs')).href);
  const srv = await startServer();
  t.after(() => srv.stop());
  const got = await roundTrip(srv.base, 'openapi-types');
  assert.equal(got.accepted, 2);
  assert.equal(got.cursor, 2);
  assert.equal(got.kind, 'snapshot');
  assert.equal(got.sameEpoch, true);
  assert.ok(got.listed.includes('openapi-types'), JSON.stringify(got.listed));
});
