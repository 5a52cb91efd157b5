"""A small AST mutation tester for evalgate's pure core (not run in CI; see bench/mutation/README.md).

``python -m bench.mutation.mutate [--modules …] [--tests …] [--limit N] [--output FILE]``

For every mutation point inside a function of the chosen modules it compiles the mutated module (same
file name and line numbers), swaps the mutated function's code object into the live function (every
function object carrying that code: decorators that keep the function, closures, lambdas), and runs
the chosen test files in a forked child that inherited every import, so a mutant costs one pytest
session over already-imported modules. A mutant is *killed* when the tests fail (or run past the
timeout: 10× the clean run, at least 20 s); it *survives* when they pass.

Operators (one change per mutant):

* comparisons ``<``↔``<=``, ``>``↔``>=``, ``==``↔``!=``, ``is``↔``is not``, ``in``↔``not in``;
* arithmetic ``+``↔``-``, ``*``↔``/``, ``//``→``/``, ``%``→``*``, ``**``→``*``; ``+=``↔``-=``;
* ``and``↔``or``; ``not x``→``x``; unary ``-x``→``x``;
* numbers ``n``→``n + 1`` (``0.5``→``1.5``); ``True``↔``False``; ``None`` in a ``return``→``0``;
* ``return x``→``return None`` (where ``x`` is not already None);
* ``min``↔``max`` calls; ``break``↔``continue``.

Strings (messages, keys) and module-level statements (constants, tables) are not mutated; a line
ending in ``# pragma: no mutate`` is skipped.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import gc
import importlib
import json
import os
import signal
import sys
import time
import types
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_MODULES = (
    "evalgate.verdict.gate",
    "evalgate.verdict.aggregate",
    "evalgate.verdict.stats",
    "evalgate.metrics.registry",
    "evalgate.metrics.retrieval",
    "evalgate.metrics.mentions",
    "evalgate.metrics.workflow",
    "evalgate.metrics.golden",
    "evalgate.metrics.rules",
    "evalgate.metrics.tokens",
    "evalgate.metrics.text",
    "evalgate.metrics.judged",
)
GATE_TESTS = ("tests/verdict/test_gate_boundaries.py", "tests/verdict/test_gate.py", "tests/verdict/test_repeats.py", "tests/judges/test_evidence.py")
TESTS_FOR = {
    "evalgate.verdict.gate": GATE_TESTS,
    "evalgate.verdict.aggregate": (*GATE_TESTS, "tests/runner/test_merge_repeats.py"),
    "evalgate.verdict.stats": ("tests/verdict/test_stats.py", "tests/verdict/test_stats_reference.py", "tests/verdict/test_compare.py", "tests/verdict/test_repeats.py"),
    "evalgate.metrics.registry": ("tests/verdict/test_gate.py", "tests/verdict/test_gate_boundaries.py", "tests/metrics/test_boundaries.py",
                                  "tests/runner/test_fast_paths.py", "tests/judges/test_evidence.py"),
    "evalgate.metrics.retrieval": ("tests/metrics/test_retrieval.py", "tests/judges/test_metrics.py"),
    "evalgate.metrics.mentions": ("tests/verdict/test_gate_boundaries.py", "tests/metrics/test_boundaries.py",
                                  "tests/metrics/test_mentions.py"),
    "evalgate.metrics.workflow": ("tests/metrics/test_workflow.py",),
    "evalgate.metrics.golden": ("tests/metrics/test_boundaries.py", "tests/metrics/test_golden.py"),
    "evalgate.metrics.rules": ("tests/metrics/test_boundaries.py", "tests/metrics/test_rules.py"),
    "evalgate.metrics.tokens": ("tests/metrics/test_tokens.py",),
    "evalgate.metrics.text": ("tests/metrics/test_mentions.py", "tests/runner/test_fast_paths.py"),
    "evalgate.metrics.judged": ("tests/metrics/test_boundaries.py", "tests/judges/test_metrics.py"),
}
METRIC_TESTS = tuple(sorted({t for tests in TESTS_FOR.values() for t in tests if "metrics" in t}))
"""The test files run against each module's mutants: the files that test the module (the slow end-to-end
files, which also cover it, are left out so a full run fits in well under an hour on 2 shared cores)."""


COMPARE_SWAP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In,
}
BINOP_SWAP: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
    ast.Mod: ast.Mult, ast.Pow: ast.Mult,
}


@dataclass
class Mutant:
    module: str
    path: str
    line: int
    function: str
    operator: str
    original: str
    mutated: str
    status: str = "pending"
    """killed | survived | timeout | not-applied | code-removed (a retest found its code gone)"""
    seconds: float = 0.0


# --- finding mutation points -----------------------------------------------------------------------


class _Points(ast.NodeVisitor):
    """Every (node id, description) that can be mutated inside a function body, in source order."""

    def __init__(self, source_lines: list[str]) -> None:
        self.lines = source_lines
        self.stack: list[str] = []
        self.in_function = 0
        self.points: list[tuple[int, str, str, int]] = []  # (node index, operator, qualname, line)
        self.index = 0
        self.nodes: dict[int, ast.AST] = {}

    def _skip(self, node: ast.AST) -> bool:
        line = getattr(node, "lineno", 0)
        return bool(line) and self.lines[line - 1].rstrip().endswith("# pragma: no mutate")

    def _add(self, node: ast.AST, operator: str) -> None:
        if not self.in_function or self._skip(node):
            return
        key = id(node)
        self.nodes[key] = node
        self.points.append((key, operator, ".".join(self.stack), getattr(node, "lineno", 0)))

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """Mutants are applied to the outermost function (a method counts as one): nested functions,
        lambdas and comprehensions live in its code object's constants."""
        if self.in_function:
            for statement in node.body:
                self.visit(statement)
            return
        self.stack.append(node.name)
        self.in_function += 1
        for statement in node.body:  # not the decorators or defaults: they run at import
            if (statement is node.body[0] and isinstance(statement, ast.Expr)
                    and isinstance(statement.value, ast.Constant) and isinstance(statement.value.value, str)):
                continue  # docstring
            self.visit(statement)
        self.in_function -= 1
        self.stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if self.in_function:
            return
        self.stack.append(node.name)
        for statement in node.body:
            if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.visit(statement)
        self.stack.pop()

    def visit_Compare(self, node: ast.Compare) -> None:
        for position, op in enumerate(node.ops):
            if type(op) in COMPARE_SWAP:
                self._add(node, f"compare:{position}")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if type(node.op) in BINOP_SWAP and not _is_string_format(node):
            self._add(node, "binop")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if type(node.op) in (ast.Add, ast.Sub):
            self._add(node, "augassign")
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        self._add(node, "boolop")
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.Not | ast.USub):
            self._add(node, "unary")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, bool) or (isinstance(value, int | float) and not isinstance(value, bool)):
            self._add(node, "constant")

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None and not (isinstance(node.value, ast.Constant) and node.value.value is None):
            self._add(node, "return")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
            self._add(node, "minmax")
        self.generic_visit(node)

    def visit_Break(self, node: ast.Break) -> None:
        self._add(node, "loopjump")

    def visit_Continue(self, node: ast.Continue) -> None:
        self._add(node, "loopjump")

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        return  # message text: not mutated


def _is_string_format(node: ast.BinOp) -> bool:
    return isinstance(node.op, ast.Mod | ast.Add) and (
        (isinstance(node.left, ast.Constant) and isinstance(node.left.value, str))
        or (isinstance(node.right, ast.Constant) and isinstance(node.right.value, str)))


def mutate_node(node: ast.AST, operator: str) -> tuple[str, str] | None:
    """Apply ``operator`` to ``node`` in place; (original text, mutated text), or None when not applicable."""
    before = ast.unparse(node)
    if operator.startswith("compare:"):
        assert isinstance(node, ast.Compare)
        position = int(operator.split(":")[1])
        node.ops[position] = COMPARE_SWAP[type(node.ops[position])]()
    elif operator == "binop":
        assert isinstance(node, ast.BinOp)
        node.op = BINOP_SWAP[type(node.op)]()
    elif operator == "augassign":
        assert isinstance(node, ast.AugAssign)
        node.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
    elif operator == "boolop":
        assert isinstance(node, ast.BoolOp)
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif operator == "unary":
        assert isinstance(node, ast.UnaryOp)
        # replaced by its operand: done by the caller through ``replacement``
        return before, ast.unparse(node.operand)
    elif operator == "constant":
        assert isinstance(node, ast.Constant)
        if isinstance(node.value, bool):
            node.value = not node.value
        else:
            node.value = node.value + 1
    elif operator == "return":
        assert isinstance(node, ast.Return)
        node.value = ast.Constant(value=None)
    elif operator == "minmax":
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        node.func.id = "max" if node.func.id == "min" else "min"
    elif operator == "loopjump":
        return before, "continue" if isinstance(node, ast.Break) else "break"
    else:  # pragma: no cover
        return None
    return before, ast.unparse(node)


class _Replace(ast.NodeTransformer):
    """Replace one node (by identity) with another."""

    def __init__(self, target: ast.AST, replacement: ast.AST) -> None:
        self.target = target
        self.replacement = replacement

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if node is self.target:
            return self.replacement
        return super().generic_visit(node)


def mutants_of(module_name: str) -> Iterator[tuple[Mutant, types.CodeType]]:
    """Every mutant of ``module_name`` with the compiled code object of its mutated function."""
    module = importlib.import_module(module_name)
    path = Path(module.__file__ or "")
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, str(path))
    finder = _Points(source.splitlines())
    finder.visit(tree)
    for key, operator, qualname, line in finder.points:
        mutated_tree = copy.deepcopy(tree, memo={})
        # find the same node in the copy: walk both trees in step
        twin = _twin(tree, mutated_tree, finder.nodes[key])
        changed = mutate_node(twin, operator)
        if changed is None:
            continue
        if operator == "unary":
            assert isinstance(twin, ast.UnaryOp)
            mutated_tree = _Replace(twin, twin.operand).visit(mutated_tree)
        elif operator == "loopjump":
            mutated_tree = _Replace(twin, ast.Continue() if isinstance(twin, ast.Break) else ast.Break()).visit(
                mutated_tree)
        ast.fix_missing_locations(mutated_tree)
        try:
            compiled = compile(mutated_tree, str(path), "exec")
        except (SyntaxError, ValueError):
            continue
        code = _find_code(compiled, qualname)
        if code is None:
            continue
        original, mutated = changed
        yield Mutant(module_name, str(path.relative_to(REPO)), line, qualname, operator.split(":")[0],
                     original, mutated), code


def _twin(original: ast.AST, copied: ast.AST, target: ast.AST) -> ast.AST:
    for a, b in zip(ast.walk(original), ast.walk(copied), strict=True):
        if a is target:
            return b
    raise LookupError("node not found")


def _find_code(code: types.CodeType, qualname: str) -> types.CodeType | None:
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_qualname == qualname:
                return const
            found = _find_code(const, qualname)
            if found is not None:
                return found
    return None


def live_functions(path: str, qualname: str) -> list[types.FunctionType]:
    """Every function object whose code is ``qualname`` of the file ``path``."""
    absolute = str(REPO / path)
    return [obj for obj in gc.get_objects()
            if isinstance(obj, types.FunctionType) and obj.__code__.co_qualname == qualname
            and obj.__code__.co_filename == absolute]


# --- running -----------------------------------------------------------------------------------------


def run_tests(tests: list[str]) -> int:
    import pytest

    args = ["-x", "-q", "-p", "no:cacheprovider", "--no-header", "-o", "addopts=", "-W", "ignore", *tests]
    with open(os.devnull, "w") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        return int(pytest.main(args))


def start_child(mutant: Mutant | None, code: types.CodeType | None, tests: list[str]) -> int:
    """Fork a child that applies ``mutant`` (None: no mutant) and runs ``tests``; its pid."""
    pid = os.fork()
    if pid:
        return pid
    try:
        if mutant is not None and code is not None:
            functions = live_functions(mutant.path, mutant.function)
            if not functions:
                os._exit(97)
            for function in functions:
                try:
                    function.__code__ = code
                except ValueError:
                    os._exit(98)
            for nested in _nested_codes(code):  # closures made already (at import) get the mutant too
                for function in live_functions(mutant.path, nested.co_qualname):
                    if function.__code__.co_code != nested.co_code or function.__code__.co_consts != nested.co_consts:
                        with contextlib.suppress(ValueError):
                            function.__code__ = nested
        os._exit(run_tests(tests))
    except BaseException:
        os._exit(99)


def _nested_codes(code: types.CodeType) -> Iterator[types.CodeType]:
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield const
            yield from _nested_codes(const)


def outcome(exit_code: int) -> str:
    if exit_code in (97, 98):
        return "not-applied"
    return "survived" if exit_code == 0 else "killed"


def run_child(mutant: Mutant | None, code: types.CodeType | None, tests: list[str], timeout: float) -> tuple[str, float]:
    """Run one child to the end (or ``timeout``): (status, seconds)."""
    started = time.monotonic()
    pid = start_child(mutant, code, tests)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return outcome(os.waitstatus_to_exitcode(status)), time.monotonic() - started
        if time.monotonic() - started > timeout:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout", time.monotonic() - started
        time.sleep(0.02)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--modules", default=",".join(DEFAULT_MODULES))
    parser.add_argument("--tests", default="", help="test files for every module (default: TESTS_FOR)")
    parser.add_argument("--output", default=str(REPO / "bench" / "mutation" / "results.json"))
    parser.add_argument("--limit", type=int, default=0, help="stop after N mutants (0: all)")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (forked children)")
    parser.add_argument("--retest", metavar="FILE",
                        help="test again only the mutants that survived in this earlier results file (after new "
                             "tests); the output is that file's results with their statuses updated")
    args = parser.parse_args(argv)
    os.chdir(REPO)
    sys.path.insert(0, str(REPO))
    modules = [m for m in args.modules.split(",") if m]
    chosen = [t for t in args.tests.split(",") if t]
    plan = {name: [t for t in (chosen or TESTS_FOR.get(name, METRIC_TESTS)) if Path(t).exists()] for name in modules}
    import pytest  # noqa: F401 - imported once here, inherited by every child

    for name in modules:
        importlib.import_module(name)
    for test in sorted({t for tests in plan.values() for t in tests}):  # children only run them
        importlib.import_module(test.removesuffix(".py").replace("/", "."))
    timeouts: dict[tuple[str, ...], float] = {}
    for tests in {tuple(t) for t in plan.values()}:
        clean, clean_seconds = run_child(None, None, list(tests), 600)
        if clean != "survived":
            print(f"the tests fail without any mutant ({clean}): {', '.join(tests)}", file=sys.stderr)
            return 2
        timeouts[tests] = max(20.0, 10 * clean_seconds)
        print(f"clean run {clean_seconds:.1f} s over {len(tests)} test files", file=sys.stderr)
    mutants = [(mutant, code, plan[name]) for name in modules for mutant, code in mutants_of(name)]
    previous: list[Mutant] = []
    if args.retest:
        previous = [Mutant(**m) for m in json.loads(Path(args.retest).read_text(encoding="utf-8"))["mutants"]]
        survived = {key(m) for m in previous if m.status == "survived"}
        existing = {key(item[0]) for item in mutants}
        paths = {item[0].path for item in mutants}
        for mutant in previous:  # its code was removed since (dead code): no longer a mutant
            if mutant.status == "survived" and mutant.path in paths and key(mutant) not in existing:
                mutant.status = "code-removed"
        mutants = [item for item in mutants if key(item[0]) in survived]
        seen: set[tuple[str, str, str, str, str]] = set()
        mutants = [item for item in mutants if not (key(item[0]) in seen or seen.add(key(item[0])))]  # type: ignore[func-returns-value]
    if args.limit:
        mutants = mutants[: args.limit]
    results: list[Mutant] = []
    total = len(mutants)
    running: dict[int, tuple[Mutant, float, float]] = {}  # pid → (mutant, started, timeout)
    queue = list(mutants)
    while queue or running:
        while queue and len(running) < args.jobs:
            mutant, code, tests = queue.pop(0)
            running[start_child(mutant, code, tests)] = (mutant, time.monotonic(), timeouts[tuple(tests)])
        for pid, (mutant, started, limit) in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            elapsed = time.monotonic() - started
            if not done and elapsed <= limit:
                continue
            if not done:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                mutant.status = "timeout"
            else:
                mutant.status = outcome(os.waitstatus_to_exitcode(status))
            mutant.seconds = elapsed
            del running[pid]
            results.append(mutant)
            if mutant.status == "survived":
                print(f"[{len(results)}/{total}] SURVIVED {mutant.path}:{mutant.line} {mutant.function}: "
                      f"{mutant.original!r} → {mutant.mutated!r}", file=sys.stderr)
            elif len(results) % 25 == 0:
                print(f"[{len(results)}/{total}] …", file=sys.stderr)
        time.sleep(0.02)
    if previous:
        retested = {key(m): m for m in results}
        results = [replace(m, status=retested[key(m)].status, seconds=retested[key(m)].seconds)
                   if m.status == "survived" and key(m) in retested else m for m in previous]
    results.sort(key=lambda m: (m.path, m.line, m.operator, m.mutated))
    summary = summarise(results)
    Path(args.output).write_text(json.dumps({"summary": summary, "mutants": [asdict(m) for m in results]},
                                            indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=1), file=sys.stderr)
    return 0


def key(mutant: Mutant) -> tuple[str, str, str, str, str]:
    """A mutant's identity across edits that move lines (a function's mutant text is the same wherever
    it sits); two identical mutants of one function are one."""
    return (mutant.path, mutant.function, mutant.operator, mutant.original, mutant.mutated)


def summarise(results: list[Mutant]) -> dict[str, object]:
    counted = [m for m in results if m.status not in ("not-applied", "code-removed")]
    killed = sum(m.status in ("killed", "timeout") for m in counted)
    by_module: dict[str, dict[str, int]] = {}
    for mutant in counted:
        row = by_module.setdefault(mutant.path, {"mutants": 0, "killed": 0})
        row["mutants"] += 1
        row["killed"] += mutant.status in ("killed", "timeout")
    return {
        "mutants": len(counted),
        "killed": killed,
        "survived": len(counted) - killed,
        "not_applied": sum(m.status == "not-applied" for m in results),
        "code_removed": sum(m.status == "code-removed" for m in results),
        "score": round(killed / len(counted), 4) if counted else None,
        "by_module": {path: row | {"score": round(row["killed"] / row["mutants"], 4)}
                      for path, row in sorted(by_module.items())},
    }


if __name__ == "__main__":
    sys.exit(main())
