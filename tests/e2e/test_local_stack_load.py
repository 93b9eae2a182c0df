"""The local stack under concurrent clients, as API Gateway + Lambda would serve them: every
client connects, every request gets a proper answer (no reset, no 5xx), and every request is
served with its own event (each client gets its own resource back, never another's)."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

CLIENTS = 32


def request(url: str, method: str, path: str, user: str, body: Any = None) -> tuple[int, Any]:
    """One request on a connection of its own (what a burst of clients opens)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    try:
        headers = {"authorization": f"Bearer dev-{user}", "content-type": "application/json"}
        connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def burst(clients: int, call: Callable[[int], tuple[int, Any]]) -> list[tuple[int, Any]]:
    """`call(i)` from `clients` threads released at once; any exception (a reset) is kept as the answer."""
    barrier = threading.Barrier(clients)
    answers: list[Any] = [None] * clients

    def client(i: int) -> None:
        barrier.wait()
        try:
            answers[i] = call(i)
        except Exception as err:  # ConnectionResetError, RemoteDisconnected...
            answers[i] = err

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def test_the_front_accepts_a_burst_larger_than_a_small_listen_backlog(live):
    assert live._server.request_queue_size >= 64  # socketserver's default is 5


def test_concurrent_clients_each_get_their_own_answer(live):
    url = live.url

    # every client creates its own agent (one user each): each gets its own agent back
    created = burst(
        CLIENTS, lambda i: request(url, "POST", "/api/agents", f"load{i}", {"name": f"Load {i}", "persona": f"Persona {i}."})
    )
    assert [c[0] if isinstance(c, tuple) else c for c in created] == [201] * CLIENTS
    agents = [answer["data"] for _, answer in created]
    assert [a["name"] for a in agents] == [f"Load {i}" for i in range(CLIENTS)]
    assert [a["persona"] for a in agents] == [f"Persona {i}." for i in range(CLIENTS)]

    # reads of one's own agent and list, all at once
    read = burst(CLIENTS, lambda i: request(url, "GET", f"/api/agents/{agents[i]['id']}", f"load{i}"))
    assert [r[0] if isinstance(r, tuple) else r for r in read] == [200] * CLIENTS
    assert [r[1]["data"]["id"] for r in read] == [a["id"] for a in agents]
    listed = burst(CLIENTS, lambda i: request(url, "GET", "/api/agents", f"load{i}"))
    assert [[a["id"] for a in r[1]["data"]["items"]] for r in listed] == [[a["id"]] for a in agents]

    # a chat turn each, all at once: each reply belongs to its own message
    def turn(i: int) -> tuple[int, Any]:
        path = f"/api/agents/{agents[i]['id']}/sessions/dashboard/messages"
        return request(url, "POST", path, f"load{i}", {"message": f"my code word is kestrel-{i}"})

    turns = burst(CLIENTS, turn)
    assert [t[0] if isinstance(t, tuple) else t for t in turns] == [200] * CLIENTS
    assert len({t[1]["data"]["runId"] for t in turns}) == CLIENTS
    sessions = burst(CLIENTS, lambda i: request(url, "GET", f"/api/agents/{agents[i]['id']}/sessions/dashboard", f"load{i}"))
    for i, (status, session) in enumerate(sessions):
        said = [b["text"] for m in session["data"]["messages"] if m["role"] == "user" for b in m["content"]]
        assert status == 200 and said == [f"my code word is kestrel-{i}"]


def test_a_user_never_sees_another_users_resource_under_load(live):
    url = live.url
    status, answer = request(url, "POST", "/api/agents", "owner", {"name": "Private", "persona": "Mine."})
    assert status == 201
    private = answer["data"]["id"]

    # the owner and strangers ask for the same agent at once: only the owner gets it
    def ask(i: int) -> tuple[int, Any]:
        return request(url, "GET", f"/api/agents/{private}", "owner" if i % 2 == 0 else f"stranger{i}")

    answers = burst(CLIENTS, ask)
    assert [a[0] if isinstance(a, tuple) else a for a in answers] == [200 if i % 2 == 0 else 404 for i in range(CLIENTS)]
