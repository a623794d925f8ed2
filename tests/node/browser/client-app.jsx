// A React page on @agent-projector/client/react, as an app writes it: the
// first session of `?sessions=` through a hook that opens its own
// connection, the others on one shared connection, and the live index. The
// test drives it through `window.__app` and its buttons, and reads what the
// hooks rendered from `window.__seen` / `window.__index`.
import { useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { connect } from '@agent-projector/client';
import { useSession, useSessionIndex } from '@agent-projector/client/react';

const params = new URLSearchParams(location.search);
const backoff = { initialMs: 50, maxMs: 500 };
const shared = connect({ baseUrl: '', sessions: [], backoff });
window.__seen = {};
window.__renders = {};
window.__relayed = [];
window.__errors = [];

function Session({ id, own }) {
  const s = useSession(id, own ? { baseUrl: '', backoff } : { connection: shared });
  useEffect(() => {
    window.__seen[id] = { state: s.state, status: s.status, cursor: s.cursor, epoch: s.epoch };
    window.__renders[id] = (window.__renders[id] ?? 0) + 1;
  });
  if (!s.state) return <section className="session" data-id={id} data-status={s.status}>waiting</section>;
  const pending = Object.values(s.state.actions).filter((a) => a.status === 'pending');
  const decide = (a) => s.approve(a.actionId).then((r) => window.__relayed.push(r), (e) => window.__errors.push(`${e.status} ${e.code}`));
  return (
    <section className="session" data-id={id} data-cursor={s.cursor} data-status={s.status}>
      {s.state.messages.map((m) => (
        <p key={m.id} className={`message ${m.role}`}>
          {m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('')}
        </p>
      ))}
      {pending.map((a) => (
        <button key={a.actionId} type="button" className="approve" data-action={a.actionId} onClick={() => decide(a)}>
          Approve {a.title}
        </button>
      ))}
    </section>
  );
}

function Index() {
  const { sessions, ready, status } = useSessionIndex({ baseUrl: '', backoff });
  useEffect(() => {
    window.__index = { sessions, ready, status };
  });
  return <ul className="index">{sessions.map((e) => <li key={e.sessionId}>{e.sessionId} {e.head}</li>)}</ul>;
}

function App() {
  const [ids, setIds] = useState(params.get('sessions').split(','));
  useEffect(() => {
    window.__app = { setIds, shared };
  }, []);
  return (
    <main>
      {ids.map((id, i) => <Session key={id} id={id} own={i === 0} />)}
      <Index />
    </main>
  );
}

createRoot(document.getElementById('root')).render(<App />);
