// A minimal AI SDK chat page, as an app writes it: `useChat` from
// `@ai-sdk/react` with `DefaultChatTransport` pointed at agent-projector's
// `/v1/chat` (same origin) or `WebSocketChatTransport` on `/v1/chat/ws`, resuming on load when `?resume` is set, and
// continuing by itself once every tool approval is answered. The test
// drives it through its DOM; `window.chat` lets the test read what useChat
// holds.
import { useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, WebSocketChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';

const params = new URLSearchParams(location.search);
// `?transport=ws`: `ai` 7's WebSocketChatTransport on `/v1/chat/ws`, one
// socket for every request of the page.
const transport = params.get('transport') === 'ws'
  ? new WebSocketChatTransport({ url: '/v1/chat/ws' })
  : new DefaultChatTransport({ api: '/v1/chat' });

function Part({ part, chat }) {
  if (part.type === 'text') return <p className="text">{part.text}</p>;
  if (!part.type.startsWith('tool-')) return null;
  const answer = (approved) => chat.addToolApprovalResponse({ id: part.approval.id, approved });
  return (
    <div className="tool" data-state={part.state}>
      {part.state === 'approval-requested' && (
        <>
          <button type="button" className="approve" onClick={() => answer(true)}>Approve</button>
          <button type="button" className="deny" onClick={() => answer(false)}>Deny</button>
        </>
      )}
      {part.output !== undefined && <pre className="output">{JSON.stringify(part.output)}</pre>}
    </div>
  );
}

function App() {
  const [draft, setDraft] = useState('');
  const chat = useChat({
    id: params.get('chat'),
    resume: params.has('resume'),
    transport,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  useEffect(() => {
    window.chat = chat;
  });
  const send = (e) => {
    e.preventDefault();
    chat.sendMessage({ text: draft });
    setDraft('');
  };
  return (
    <main data-status={chat.status}>
      {chat.messages.map((m) => (
        <div key={m.id} className={`message ${m.role}`}>
          {m.parts.map((p, i) => <Part key={i} part={p} chat={chat} />)}
        </div>
      ))}
      {chat.error && <p className="error">{chat.error.message}</p>}
      <form onSubmit={send}>
        <input name="text" value={draft} onChange={(e) => setDraft(e.target.value)} />
        <button type="submit">Send</button>
        <button type="button" className="stop" onClick={() => chat.stop()}>Stop</button>
      </form>
    </main>
  );
}

createRoot(document.getElementById('root')).render(<App />);
