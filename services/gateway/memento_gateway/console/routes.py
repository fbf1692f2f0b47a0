"""The console's routes, mounted at /console by the gateway's app factory, inside its security headers."""

from __future__ import annotations

from pathlib import Path

from starlette.routing import Mount, Route, Router
from starlette.staticfiles import StaticFiles

from memento_gateway.console import pages, signin
from memento_gateway.console.security import SecurityHeaders

GET, POST = ["GET"], ["POST"]


def mount() -> Mount:
    routes = [
        Route("/", pages.home, methods=GET),
        Route("/login", signin.login_page, methods=GET),
        Route("/login", signin.login_submit, methods=POST),
        Route("/logout", signin.logout, methods=POST),
        Route("/oauth/start", signin.oauth_start, methods=GET),
        Route("/oauth/callback", signin.oauth_callback, methods=GET),
        Route("/memories", pages.memories, methods=GET),
        Route("/memories/{id}", pages.memory, methods=GET),
        Route("/memories/{id}/graph", pages.graph, methods=GET),
        Route("/memories/{id}/forget", pages.confirm_forget, methods=GET),
        Route("/memories/{id}/{action}", pages.memory_action, methods=POST),
        Route("/documents", pages.documents, methods=GET),
        Route("/documents/{id}", pages.document, methods=GET),
        Route("/working", pages.working, methods=GET),
        Route("/stats", pages.stats, methods=GET),
        Route("/dead-letters", pages.dead_letters, methods=GET),
        Route("/dead-letters/{id}/replay", pages.replay, methods=POST),
        Route("/keys", pages.keys, methods=GET),
        Route("/audit", pages.audit, methods=GET),
        Route("/workspace", pages.workspace, methods=POST),
        Mount("/static", StaticFiles(directory=Path(__file__).parent / "static"), name="static"),
    ]
    return Mount("/console", app=SecurityHeaders(Router(routes=routes)))
