"""Case selection: ids over first-N, category/tag filters, stable shards, and the errors."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from evalgate.dataset.load import load_datasets
from evalgate.dataset.select import parse_shard, select_cases, shard_of, split_list
from evalgate.errors import UserError
from evalgate.model import Case

FIXTURES = Path(__file__).parent.parent / "fixtures" / "datasets"


def make(case_id: str, category: str | None = None, tags: list[str] | None = None) -> Case:
    return Case(id=case_id, category=category, tags=tags or [])


@pytest.fixture
def cases() -> list[Case]:
    return [
        make("safety_star_rumor_01", "safety", ["rumor", "safety"]),
        make("supervisor_do_not_drop_star", "supervisor", ["roster"]),
        make("routing_matchup_review", "Matchup", []),
        make("waiver_01", "waiver", ["Pricing"]),
        make("waiver_02", "waiver", []),
        make("math_01", None, ["math"]),
    ]


def ids(selected: list[Case]) -> list[str]:
    return [case.id for case in selected]


def test_no_filters_keeps_everything_in_order(cases: list[Case]) -> None:
    assert ids(select_cases(cases)) == ids(cases)


def test_case_ids_override_first_n_and_keep_dataset_order(cases: list[Case]) -> None:
    chosen = select_cases(cases, case_ids="waiver_02, safety_star_rumor_01,waiver_02", first_n=1)
    assert ids(chosen) == ["safety_star_rumor_01", "waiver_02"]
    assert ids(select_cases(cases, case_ids=["math_01", "waiver_01"])) == ["waiver_01", "math_01"]


def test_first_n_takes_the_first_cases(cases: list[Case]) -> None:
    assert ids(select_cases(cases, first_n=2)) == ["safety_star_rumor_01", "supervisor_do_not_drop_star"]
    assert ids(select_cases(cases, first_n=100)) == ids(cases)


def test_first_n_caps_what_the_filters_leave(cases: list[Case]) -> None:
    assert ids(select_cases(cases, categories="waiver,supervisor", first_n=2)) == [
        "supervisor_do_not_drop_star",
        "waiver_01",
    ]


def test_category_filter_matches_any_listed_category_case_insensitively(cases: list[Case]) -> None:
    assert ids(select_cases(cases, categories=["matchup", "SAFETY"])) == [
        "safety_star_rumor_01",
        "routing_matchup_review",
    ]


def test_tag_filter_matches_any_listed_tag(cases: list[Case]) -> None:
    assert ids(select_cases(cases, tags="math,pricing")) == ["waiver_01", "math_01"]


def test_category_and_tag_filters_combine(cases: list[Case]) -> None:
    assert ids(select_cases(cases, categories="waiver", tags=["pricing"])) == ["waiver_01"]
    assert ids(select_cases(cases, case_ids="waiver_01,waiver_02,math_01", categories="waiver")) == [
        "waiver_01",
        "waiver_02",
    ]


def test_unknown_case_ids_are_listed_with_a_close_match(cases: list[Case]) -> None:
    with pytest.raises(UserError) as info:
        select_cases(cases, case_ids="waiver_1,safety_star_rumor_01,nothing_like_it")
    assert str(info.value) == "case_ids: unknown case ids 'waiver_1' (did you mean 'waiver_01'?), 'nothing_like_it'"


def test_many_unknown_ids_are_summarised(cases: list[Case]) -> None:
    with pytest.raises(UserError, match=r"and 5 more$"):
        select_cases(cases, case_ids=[f"zz{i}" for i in range(15)])


def test_empty_selection_names_the_filters(cases: list[Case]) -> None:
    with pytest.raises(UserError) as info:
        select_cases(cases, categories="waiver", tags="rumor")
    assert str(info.value) == (
        "selection: the selection leaves no cases to run (6 loaded; categories waiver → 2; tags rumor → 0)"
    )
    with pytest.raises(UserError, match=r"\(0 loaded\)"):
        select_cases([])


@pytest.mark.parametrize("first_n", [0, -3, True])
def test_first_n_must_be_positive(cases: list[Case], first_n: int) -> None:
    with pytest.raises(UserError, match=r"^first_n: must be a positive integer"):
        select_cases(cases, first_n=first_n)


def test_split_list() -> None:
    assert split_list(" a, b,,c ") == ["a", "b", "c"]
    assert split_list(["a,b", " c "]) == ["a", "b", "c"]
    assert split_list("") is None and split_list(None) is None and split_list([" , "]) is None


# --- shards -------------------------------------------------------------------------------------------


def test_shard_formula() -> None:
    for case_id in ("GD-001", "test_001_basic_mention", "q-0123456789", "ünïcödé"):
        expected = int(hashlib.sha1(case_id.encode()).hexdigest()[:8], 16) % 7 + 1
        assert shard_of(case_id, 7) == expected


def test_shards_partition_the_cases() -> None:
    pool = [make(f"case-{i:04d}") for i in range(500)]
    shards = [ids(select_cases(pool, shard=(i, 4))) for i in range(1, 5)]
    assert sorted(case_id for shard in shards for case_id in shard) == ids(pool)
    assert sum(len(s) for s in shards) == len(pool)
    assert all(80 <= len(s) <= 170 for s in shards), [len(s) for s in shards]
    for shard in shards:  # dataset order within each shard
        assert shard == sorted(shard)


def test_adding_cases_does_not_move_existing_ones() -> None:
    before = [make(f"case-{i}") for i in range(200)]
    after = [make("new-first"), *before[:100], *[make(f"added-{i}") for i in range(300)], *before[100:]]
    for index in range(1, 4):
        old = set(ids(select_cases(before, shard=(index, 3))))
        new = set(ids(select_cases(after, shard=(index, 3))))
        assert old == new & set(ids(before))


def test_shard_applies_after_other_filters(cases: list[Case]) -> None:
    kept: list[str] = []
    for index in (1, 2):
        expected = [c.id for c in cases if c.category == "waiver" and shard_of(c.id, 2) == index]
        if expected:
            assert ids(select_cases(cases, categories="waiver", shard=(index, 2))) == expected
        else:
            with pytest.raises(UserError, match=f"shard {index}/2 → 0"):
                select_cases(cases, categories="waiver", shard=(index, 2))
        kept += expected
    assert sorted(kept) == ["waiver_01", "waiver_02"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1/4", (1, 4)), (" 4/4 ", (4, 4)), ("1/1", (1, 1))],
)
def test_parse_shard(text: str, expected: tuple[int, int]) -> None:
    assert parse_shard(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0/4", "shard: shard 0/4 is out of range: need 1 ≤ i ≤ n"),
        ("5/4", "shard: shard 5/4 is out of range: need 1 ≤ i ≤ n"),
        ("1/0", "shard: shard 1/0 is out of range: need 1 ≤ i ≤ n"),
        ("2", "shard: expected 'i/n' such as '1/4' (got '2')"),
        ("a/b", "shard: expected 'i/n' such as '1/4' (got 'a/b')"),
    ],
)
def test_parse_shard_errors(text: str, message: str) -> None:
    with pytest.raises(UserError) as info:
        parse_shard(text)
    assert str(info.value) == message


def test_bad_shard_tuple_in_select(cases: list[Case]) -> None:
    with pytest.raises(UserError, match="out of range"):
        select_cases(cases, shard=(3, 2))


def test_selection_on_loaded_fixtures() -> None:
    loaded = load_datasets(["seeds"], base_dir=FIXTURES)
    chosen = select_cases(loaded.cases, case_ids="GD-021,safety_star_rumor_01")
    assert [(c.id, c.location) for c in chosen] == [
        ("safety_star_rumor_01", "seeds/fanvise.jsonl:1"),
        ("GD-021", "seeds/golden_dataset.json:17"),
    ]
    assert ids(select_cases(loaded.cases, categories="quality,data")) == ["GD-011", "GD-021"]
