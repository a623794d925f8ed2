"""A LangGraph agent served over AG-UI by the `ag-ui-langgraph` adapter's own
FastAPI endpoint (uvicorn on a free loopback port, printed as
`listening on http://127.0.0.1:PORT`), for the Node suite's AG-UI gateway
test. Two steps on LangChain's fake chat model (no network): the agent says
it will check, then waits until `GET /open` before it answers, so that a test
can join the run in the middle."""

import asyncio
import itertools
import socket
from typing import Annotated

import uvicorn
from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

FIRST = "Let me check the forecast."
ANSWER = "It is sunny in Oslo today."


class State(TypedDict):
    messages: Annotated[list, add_messages]
    city: str


gate = asyncio.Event()


def graph():
    model = GenericFakeChatModel(
        messages=itertools.cycle([AIMessage(content=FIRST), AIMessage(content=ANSWER)])
    )

    async def check(state: State):
        return {"messages": [await model.ainvoke(state["messages"])]}

    async def answer(state: State):
        await gate.wait()
        gate.clear()
        return {"messages": [await model.ainvoke(state["messages"])], "city": "Oslo"}

    g = StateGraph(State)
    g.add_node("check", check)
    g.add_node("answer", answer)
    g.add_edge(START, "check")
    g.add_edge("check", "answer")
    g.add_edge("answer", END)
    return g.compile(checkpointer=MemorySaver())


app = FastAPI()
add_langgraph_fastapi_endpoint(app, LangGraphAgent(name="weather", graph=graph()), "/agent")


@app.get("/open")
async def open_gate():
    gate.set()
    return {"open": True}


if __name__ == "__main__":
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
