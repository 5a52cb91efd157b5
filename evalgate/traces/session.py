"""A run's trace session: the collector, the OTLP/HTTP receiver (when ``traces`` is on) and the spool
directory where command targets may write their spans (``EVALGATE_TRACE_FILE``)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate.traces.receiver import Collector, Receiver
from evalgate.traces.traced import TracedTarget

if TYPE_CHECKING:
    from evalgate.config.settings import Settings


class TraceSession:
    def __init__(self, settings: Settings) -> None:
        self.enabled = settings.traces
        self.grace = settings.traces_grace_seconds
        self.spool: Path | None = None
        self.collector: Collector | None = None
        self.receiver: Receiver | None = None
        self._settings = settings

    async def start(self) -> TraceSession:
        if not self.enabled:
            return self
        settings = self._settings
        self.spool = Path(tempfile.mkdtemp(prefix="evalgate-traces-"))
        self.collector = Collector(max_spans_per_case=settings.traces_max_spans_per_case, spool=self.spool)
        self.receiver = Receiver(self.collector, host=settings.traces_host, port=settings.traces_port,
                                 max_request_bytes=settings.traces_max_request_bytes)
        try:
            await self.receiver.start()
        except BaseException:
            shutil.rmtree(self.spool, ignore_errors=True)
            raise
        return self

    def wrap(self, target: Any) -> TracedTarget:
        endpoint = f"{self.receiver.endpoint}/v1/traces" if self.receiver is not None else None
        return TracedTarget(target, self.collector, grace=self.grace, endpoint=endpoint)

    @property
    def notice(self) -> str | None:
        if self.receiver is None:
            return None
        return (f"receiving OpenTelemetry traces on {self.receiver.endpoint}/v1/traces "
                f"(listening on {self.receiver.host}:{self.receiver.port})")

    def silence_warning(self) -> str | None:
        """The warning for a run whose receiver got no span at all (an agent not exporting, or exporting
        elsewhere), else None."""
        if self.receiver is None or self.collector is None:
            return None
        stats = self.collector.stats
        if stats.spans or stats.ignored_spans or stats.dropped_spans:
            return None
        why = (f"{stats.rejected_requests} export request(s) were rejected" if stats.rejected_requests
               else "nothing was exported to it")
        return (f"traces: no span arrived at {self.receiver.endpoint}/v1/traces during the run ({why}); is the "
                "agent's OTEL_EXPORTER_OTLP_ENDPOINT pointing there? (docs/traces.md)")

    def warnings(self) -> list[str]:
        """The run's trace warnings: no span at all (``silence_warning``), spans that came after their case's
        grace time, spans without a trace id evalgate sent, spans of failed attempts (never scored)."""
        silent = self.silence_warning()
        if silent is not None or self.receiver is None or self.collector is None:
            return [silent] if silent is not None else []
        stats = self.collector.stats
        found: list[str] = []
        if stats.late_spans:
            found.append(f"traces: {stats.late_spans:,} span(s) arrived after their case's grace time "
                         f"(traces_grace_seconds={self.grace:g}) and were not scored; raise traces_grace_seconds "
                         "or shorten the exporter's batch delay (docs/traces.md)")
        foreign = stats.ignored_spans - stats.late_spans
        if foreign:
            found.append(f"traces: {foreign:,} span(s) carried a trace id evalgate never sent and were not scored; "
                         "does the agent continue the request's traceparent header? (docs/traces.md)")
        if stats.failed_attempt_spans:
            found.append(f"traces: {stats.failed_attempt_spans:,} span(s) of failed target-call attempts (retried "
                         "with a fresh trace id) were not scored")
        return found

    def describe(self) -> dict[str, Any]:
        """What results.json's ``metadata.traces`` records: the endpoint and the receiver's counters."""
        if self.receiver is None or self.collector is None:
            return {}
        return {"traces": {"endpoint": f"{self.receiver.endpoint}/v1/traces", **self.collector.stats.as_dict()}}

    async def close(self) -> None:
        if self.receiver is not None:
            await self.receiver.stop()
        if self.spool is not None:
            shutil.rmtree(self.spool, ignore_errors=True)
