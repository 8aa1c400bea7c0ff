"""The learner's end of the judge's channel (proxy.py): run in the learner's kernel by the
grader while a test cell runs in the judge (judge.py).

serve() connects to the judge, proves it was sent by the grader (the token), then answers the
judge's requests (name these variables, call this function, read that attribute) from the
kernel's namespace until the judge says it is done. A learner's function called this way runs
here, in the learner's kernel, as it would in the test cell; only data goes back.
"""

from __future__ import annotations

import socket

from .proxy import ChannelClosed, Peer


def serve(port: int, token: str, namespace=None, connect_s: float = 60.0) -> None:
    """Answer the judge on 127.0.0.1:port until it is done (or gone)."""
    if namespace is None:
        from IPython import get_ipython

        namespace = get_ipython().user_ns
    sock = socket.create_connection(("127.0.0.1", int(port)), timeout=connect_s)
    sock.settimeout(None)
    peer = Peer(sock, "learner", namespace)
    try:
        peer.send({"token": token})
        while True:
            message = peer.receive()
            if message.get("op") == "done":
                return
            peer.answer(message)
    except ChannelClosed:
        return
    finally:
        sock.close()
