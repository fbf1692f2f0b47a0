"""Which tool dialects a session serves (SPEC "Tool dialects"): `?profile=a,b` on the URL, within what the
credential is bound to; `fragments` when neither says; `all` for every dialect."""

from __future__ import annotations

from memento_shared.tools.registry import DEFAULT_PROFILES, PROFILES


class ProfileError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _expand(profiles: tuple[str, ...]) -> set[str]:
    return set(PROFILES) if "all" in profiles else set(profiles)


def choose(requested: str | None, bound: tuple[str, ...]) -> tuple[str, ...]:
    """The session's profiles. A credential's binding can be narrowed by the URL, never widened."""
    if not requested:
        return bound or DEFAULT_PROFILES
    chosen = tuple(dict.fromkeys(p.strip() for p in requested.split(",") if p.strip()))
    unknown = [p for p in chosen if p not in PROFILES and p != "all"]
    if not chosen or unknown:
        raise ProfileError(400, f"profile: choose from {', '.join(PROFILES)} or all")
    if bound and not _expand(chosen) <= _expand(bound):
        raise ProfileError(403, f"profile: this credential is limited to {', '.join(bound)}")
    return chosen
