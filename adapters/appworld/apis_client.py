"""The code shell's side of the apps' socket (imported by ``serve_app.py``, in AppWorld's venv).

With ``remote_apis_url`` AppWorld's ``Requester`` sends every API call with ``requests`` to
that URL, and also drives the apps' state through it (``/dbs``, ``/date_time``, ``/seed``,
``/dbs/save``, ``/dbs/cache``). Here the URL is a Unix socket (the shell has no network) and
the state is rubricgym's to drive, over a control socket the shell never sees: the apps serve
only their APIs on this one, so the state calls become no-ops in the shell.
"""

from __future__ import annotations

import socket
from types import SimpleNamespace
from typing import Any

APIS_URL = "http://appworld-apis"  # the host part of API requests over the apps' socket


def unix_session(socket_path: str) -> Any:
    """A ``requests.Session`` whose every connection goes to ``socket_path``."""
    import requests  # AppWorld's venv: this module runs there
    import urllib3  # AppWorld's venv: this module runs there

    class UnixConnection(urllib3.connection.HTTPConnection):
        def _new_conn(self) -> socket.socket:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(socket_path)
            return sock

    class UnixPool(urllib3.HTTPConnectionPool):
        ConnectionCls = UnixConnection

    class UnixAdapter(requests.adapters.HTTPAdapter):
        def __init__(self) -> None:
            super().__init__()
            self.pool = UnixPool("localhost", maxsize=4)

        def get_connection_with_tls_context(self, request, verify, proxies=None, cert=None):
            return self.pool

        def get_connection(self, url, proxies=None):
            return self.pool

        def close(self) -> None:
            self.pool.close()
            super().close()

    session = requests.Session()
    session.trust_env = False
    session.mount(APIS_URL + "/", UnixAdapter())
    return session


def use_apis_socket(socket_path: str) -> None:
    """Send AppWorld's API requests over ``socket_path`` and make its state calls no-ops."""
    import appworld.environment as environment  # AppWorld's venv: this module runs there
    import appworld.requester as requester  # AppWorld's venv: this module runs there

    session = unix_session(socket_path)
    requester.requests = SimpleNamespace(get=session.get, post=session.post, put=session.put,
                                         patch=session.patch, delete=session.delete)

    def nothing(*args: Any, **kwargs: Any) -> None:
        return None

    for name in ("set_remote_dbs", "set_remote_random_seed", "set_remote_show_api_response_schemas",
                 "unset_remote_date_and_time"):
        setattr(requester, name, nothing)
    requester.set_remote_date_and_time = lambda url, date_and_time: "set-by-rubricgym"
    environment.clear_remote_dbs_cache = nothing
    original_save_state = environment.AppWorld._save_state

    def save_state(self, directory: str) -> None:  # the state lives in the apps, not here
        if not self.remote_apis_url:
            original_save_state(self, directory)

    environment.AppWorld._save_state = save_state
