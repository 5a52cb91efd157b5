"""OpenTelemetry traces of the system under test: the span model and OTLP parsers (``spans``), what a
case's spans say (``summary``), the W3C ``traceparent`` each target call carries (``context``), the
OTLP/HTTP receiver and the per-case collector (``receiver``), and the target wrapper that attaches a
case's trace to its answer (``traced``). See docs/traces.md."""
