"""A real AG-UI framework into agent-projector (issue 15 item 1): a LangGraph
graph on LangChain's fake chat model (no network), run by the
`ag-ui-langgraph` adapter exactly as its FastAPI endpoint runs it, its events
encoded by `ag-ui-protocol`'s `EventEncoder` and streamed to the session as
the adapter's SSE body. The session holds the conversation the adapter's
own `MESSAGES_SNAPSHOT` says, the graph's state, and a completed run; the
LangGraph events it re-emits as `RAW` are kept and said, not dropped."""

import asyncio
import json
import urllib.request
from typing import Annotated

from ag_ui.core import RunAgentInput, UserMessage
from ag_ui.encoder import EventEncoder
from ag_ui_langgraph import LangGraphAgent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

ANSWER = "It is sunny in Oslo today."


class State(TypedDict):
    messages: Annotated[list, add_messages]
    city: str


def graph():
    model = GenericFakeChatModel(messages=iter([AIMessage(content=ANSWER)]))

    async def agent(state: State):
        reply = await model.ainvoke(state["messages"])
        return {"messages": [reply], "city": "Oslo"}

    g = StateGraph(State)
    g.add_node("agent", agent)
    g.add_edge(START, "agent")
    g.add_edge("agent", END)
    return g.compile(checkpointer=MemorySaver())


def run_events():
    """The adapter's events for one run, encoded as its endpoint sends them."""
    agent = LangGraphAgent(name="weather", graph=graph())
    encoder = EventEncoder()
    run = RunAgentInput(
        thread_id="th1", run_id="run1", state={}, tools=[], context=[], forwarded_props={},
        messages=[UserMessage(id="u1", role="user", content="Weather in Oslo?")],
    )

    async def collect():
        return [(e, encoder.encode(e)) async for e in agent.run(run)]

    return asyncio.run(collect()), encoder.get_content_type()


def test_a_langgraph_run_through_the_ag_ui_adapter(server):
    events, content_type = run_events()
    types = [e.type.value for e, _ in events]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED", types
    assert "TEXT_MESSAGE_CONTENT" in types and "MESSAGES_SNAPSHOT" in types

    def body():
        for _, line in events:
            yield line.encode()

    req = urllib.request.Request(
        f"{server.base}/v1/sessions/langgraph/events", data=body(),
        headers={"content-type": content_type}, method="POST",
    )
    with urllib.request.urlopen(req) as r:
        reply = json.load(r)
    codes = {w["code"] for w in reply["warnings"]}
    assert codes <= {"ag_ui_not_projected"}, reply["warnings"]
    raws = types.count("RAW")
    assert sum(w["code"] == "ag_ui_not_projected" for w in reply["warnings"]) == raws, "each RAW is said"

    with urllib.request.urlopen(f"{server.base}/v1/sessions/langgraph/snapshot") as r:
        state = json.load(r)["state"]
    (snapshot,) = [e for e, _ in events if e.type.value == "MESSAGES_SNAPSHOT"]
    said = [(m.id, m.role, m.content) for m in snapshot.messages]
    ours = [
        (m["id"], m["role"], "".join(p["text"] for p in m["parts"] if p["type"] == "text"))
        for m in state["messages"]
    ]
    # The adapter's RUN_STARTED carries no `input`, so the user's message is
    # first told by the closing MESSAGES_SNAPSHOT: the session keeps the
    # order in which it learnt the messages (its live clients saw that
    # order), the same messages the adapter says.
    assert sorted(ours) == sorted(said)
    assert [m[0] for m in ours] == [said[1][0], "u1"]
    assert dict((i, t) for i, _, t in ours)[said[1][0]] == ANSWER
    assert state["app"]["city"] == "Oslo"
    assert state["runtime"]["status"] == "completed"
    assert state["runtime"]["runId"] == "run1"
