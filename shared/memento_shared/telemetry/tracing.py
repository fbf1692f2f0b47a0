"""OpenTelemetry setup and W3C trace-context propagation through dict carriers (HTTP headers, outbox, jobs)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from opentelemetry import context, propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, Sampler

_INSTRUMENTED = False
# Probes and scrapes would be most of the spans and say nothing about a request.
EXCLUDED_URLS = "/health,/livez,/metrics"


def setup_tracing(service: str, otlp_endpoint: str = "") -> TracerProvider:
    """One provider per process; the sampler follows OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG (default:
    parent-based always-on), so a sampled request stays sampled across every service it reaches. Without an
    endpoint and without a sampler asked for, nothing is sampled."""
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", service)})
    provider = TracerProvider(resource=resource, sampler=sampler_for(otlp_endpoint, os.environ))
    if otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_endpoint.rstrip("/") + "/v1/traces"))
        )
    trace.set_tracer_provider(provider)
    instrument_clients()
    return provider


def sampler_for(otlp_endpoint: str, environ: Mapping[str, str]) -> Sampler | None:
    """None (the SDK's choice from OTEL_TRACES_SAMPLER, parent-based always-on by default) when spans have somewhere
    to go or a sampler is asked for; otherwise record none: with nowhere to send them spans are only CPU (issue 50,
    bench/README.md). Trace ids still reach the logs and the next service, marked not sampled."""
    return None if otlp_endpoint or environ.get("OTEL_TRACES_SAMPLER", "").strip() else ALWAYS_OFF


def instrument_clients() -> None:
    """Spans for every asyncpg query, Redis command and HTTP request: aiohttp between our services, httpx to
    external providers (both also carry traceparent along)."""
    global _INSTRUMENTED
    if _INSTRUMENTED:
        return
    from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor
    from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.redis import RedisInstrumentor

    AsyncPGInstrumentor().instrument()
    RedisInstrumentor().instrument()
    HTTPXClientInstrumentor().instrument()
    AioHttpClientInstrumentor().instrument()
    _INSTRUMENTED = True


def traced_asgi(app: Any) -> Any:
    """Server spans for an ASGI app, continuing the caller's trace from its traceparent header."""
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

    # The per-message "receive"/"send" spans say nothing the server span does not, at two spans per request.
    return OpenTelemetryMiddleware(app, excluded_urls=EXCLUDED_URLS, exclude_spans=["receive", "send"])


def tracer(name: str) -> trace.Tracer:
    return trace.get_tracer(name)


def inject_headers(headers: dict[str, str] | None = None) -> dict[str, str]:
    carrier = dict(headers or {})
    propagate.inject(carrier)
    return carrier


def current_traceparent() -> str | None:
    return inject_headers().get("traceparent")


def extract_context(traceparent: str | None) -> context.Context:
    return propagate.extract({"traceparent": traceparent} if traceparent else {})
