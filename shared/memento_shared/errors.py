"""The stable tool error codes (SPEC "Errors") and the exception that carries them."""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    INVALID_PARAMETER = "INVALID_PARAMETER"
    MEMORY_NOT_FOUND = "MEMORY_NOT_FOUND"
    STORAGE_ERROR = "STORAGE_ERROR"
    EMBEDDING_ERROR = "EMBEDDING_ERROR"
    RESOURCE_BUSY = "RESOURCE_BUSY"
    UNAUTHORIZED = "UNAUTHORIZED"
    FORBIDDEN = "FORBIDDEN"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    RATE_LIMITED = "RATE_LIMITED"
    CONFLICT = "CONFLICT"


# Codes a retry of the same call can cure. STORAGE_ERROR is retryable only when it says the store could not be
# reached (a lost connection, a timeout): the one raised for a failure inside the store's work is not.
RETRYABLE = {ErrorCode.RESOURCE_BUSY, ErrorCode.RATE_LIMITED}


class MementoError(Exception):
    """A failure the caller can act on; becomes an `isError` tool result with a structured body."""

    def __init__(
        self, code: ErrorCode, message: str, *, field: str | None = None, retryable: bool | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.retryable = code in RETRYABLE if retryable is None else retryable

    def to_body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code.value, "message": self.message, "retryable": self.retryable}
        if self.field:
            error["field"] = self.field
        return {"error": error}


def invalid(field: str, message: str) -> MementoError:
    return MementoError(ErrorCode.INVALID_PARAMETER, f"{field}: {message}", field=field)


def unavailable(message: str) -> MementoError:
    """A store or service that could not be reached: the same call may well succeed in a moment."""
    return MementoError(ErrorCode.STORAGE_ERROR, message, retryable=True)


def outcome_unknown() -> MementoError:
    """The database connection broke while COMMIT was under way (db.rls.CommitOutcomeUnknown): never "nothing was
    changed", since it may have been."""
    return unavailable(
        "the connection to the database was lost while committing; the change may have been applied: check before"
        " repeating it"
    )


def not_found(what: str) -> MementoError:
    # One answer for unknown and invisible ids: existence must not leak across agents or tenants.
    return MementoError(ErrorCode.MEMORY_NOT_FOUND, f"{what} not found")
