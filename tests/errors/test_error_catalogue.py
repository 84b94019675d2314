"""The error catalogue: every mistake a newcomer makes gets a typed error naming the culprit, and changes nothing.

Each entry of :data:`catalogue_api.CATALOGUE` and :data:`catalogue_cli.CLI` is one mistake; the test fails on an
untyped error (not a :class:`MergeTableError`), the wrong class, a message without the culprit's name, no error
at all, or any change to the table's files. The command-line mistakes run through ``mergetable``'s ``main``,
with and without ``--json``.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from catalogue_api import CATALOGUE
from catalogue_cli import CLI
from catalogue_support import CliMistake, Ctx, Mistake, error_classes, make_ctx, tree, without_module

from mergetable.cli.main import main
from mergetable.core.errors import MergeTableError

MINIMUM = 65


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(make_ctx(tmp_path_factory.mktemp("template")).uri)


def word_of(mistake: Mistake | CliMistake, ctx: Ctx) -> str:
    return mistake.word(ctx) if callable(mistake.word) else mistake.word


def test_the_catalogue_is_large_and_its_entries_distinct() -> None:
    ids = [m.id for m in CATALOGUE] + [m.id for m in CLI]
    assert len(ids) == len(set(ids)), "duplicate ids"
    print(f"error catalogue: {len(CATALOGUE)} API and {len(CLI)} command-line mistakes, {len(ids)} in all")
    assert len(ids) >= MINIMUM


@pytest.mark.parametrize("mistake", CATALOGUE, ids=lambda m: m.id)
def test_api_mistake(mistake: Mistake, tmp_path: Path, template: Path) -> None:
    ctx = make_ctx(tmp_path, template)
    before = tree(Path(ctx.uri))
    with without_module(mistake.without):
        try:
            mistake.call(ctx)
        except MergeTableError as exc:
            error: MergeTableError = exc
        except Exception as exc:
            pytest.fail(f"untyped error {type(exc).__name__}: {exc}")
        else:
            pytest.fail("no error was raised")
    assert isinstance(error, mistake.error), f"{type(error).__name__} is not a {mistake.error.__name__}: {error}"
    assert word_of(mistake, ctx) in str(error), f"the message does not name {word_of(mistake, ctx)!r}: {error}"
    assert tree(Path(ctx.uri)) == before, "the table changed"
    new = Path(ctx.new_uri)
    assert not new.exists() or not any(p.is_file() for p in new.rglob("*")), "create_table left files behind"


def run_main(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own exits must not escape main()
            pytest.fail(f"main() raised SystemExit({exc.code}); stderr: {err.getvalue()}")
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("mistake", CLI, ids=lambda m: m.id)
def test_cli_mistake(mistake: CliMistake, tmp_path: Path, template: Path) -> None:
    ctx = make_ctx(tmp_path, template)
    before = tree(Path(ctx.uri))
    word = word_of(mistake, ctx)
    argv = mistake.argv(ctx)
    with without_module(mistake.without):
        code, out, err = run_main(argv)
        assert code != 0, f"exit status 0; stdout: {out}"
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("mergetable: error: "), err
        assert word in lines[0], f"the message does not name {word!r}: {lines[0]}"
        json_code, json_out, json_err = run_main(["--json", *argv])
    assert json_code == code and json_out == ""
    report = json.loads(json_err)["error"]
    assert report["exit_code"] == code and word in report["message"]
    cls = error_classes().get(report["class"])
    assert cls is not None, f"untyped error {report['class']}: {report['message']}"
    assert issubclass(cls, mistake.error), f"{cls.__name__} is not a {mistake.error.__name__}"
    assert tree(Path(ctx.uri)) == before, "the table changed"
