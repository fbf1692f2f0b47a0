"""JSON log lines on stderr, stamped with service, trace and span ids.

Log messages are event keys (`outbox.relayed`) with a few fields; never memory content, tool arguments or
secrets. `SECRET_KEYS` scrubs fields whose names look sensitive, as a second line of defence.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time

from opentelemetry import trace

SECRET_KEYS = re.compile(r"pass|secret|token|auth|key|cookie|session|jwt|credential|content|args|payload", re.I)
_EXTRA_SKIP = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "event": record.getMessage(),
        }
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            line["trace_id"] = format(span.trace_id, "032x")
            line["span_id"] = format(span.span_id, "016x")
        for key, value in record.__dict__.items():
            if key not in _EXTRA_SKIP and not key.startswith("_"):
                line[key] = "[REDACTED]" if SECRET_KEYS.search(key) else value
        if record.exc_info and record.exc_info[0] is not None:
            line["error_type"] = record.exc_info[0].__name__
        return json.dumps(line, default=str)


def setup_logging(service: str, level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Access logs would carry query strings (session ids, access keys on /sse); request metrics replace them.
    logging.getLogger("uvicorn.access").disabled = True
    for noisy in ("httpx", "httpcore", "arq.jobs", "arq.worker"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
