"""Which spans a service records: none when they have nowhere to go, unless a sampler is asked for (issue 50)."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider

from memento_shared.telemetry.tracing import sampler_for


def _records(sampler) -> bool:
    return TracerProvider(sampler=sampler).get_tracer("t").start_span("call").is_recording()


def test_without_an_endpoint_no_span_is_recorded_but_the_trace_id_is_real():
    span = TracerProvider(sampler=sampler_for("", {})).get_tracer("t").start_span("call")
    assert not span.is_recording()
    assert span.get_span_context().is_valid, "logs and the next service still get a trace id"
    assert not span.get_span_context().trace_flags.sampled
    assert not _records(sampler_for("", {"OTEL_TRACES_SAMPLER": ""})), "compose and k8s template it empty"


def test_with_an_endpoint_or_a_sampler_asked_for_spans_are_recorded():
    assert _records(sampler_for("http://127.0.0.1:4318", {}))
    assert _records(sampler_for("", {"OTEL_TRACES_SAMPLER": "parentbased_always_on"}))
