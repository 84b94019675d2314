"""The one reading of option maps: case, spellings, typed values, unknown keys with suggestions, and the
Paimon options mergetable does not support; and the one check of a table's columns."""

from __future__ import annotations

import pyarrow as pa
import pytest

from mergetable.core.errors import OptionsError, SchemaChangeError, SchemaError
from mergetable.core.option_map import PAIMON_UNSUPPORTED_OPTIONS, OptionMap, lower_keys, unknown_option
from mergetable.core.options import TABLE_OPTION_KEYS, TableOptions
from mergetable.core.read_options import ReadRequest
from mergetable.core.schema import TableSchema, check_column
from mergetable.core.write_options import WriteOptions


def test_keys_match_in_any_case_and_values_stay_text() -> None:
    opts = OptionMap.of({" Scan.Snapshot-ID ": 3, "Gone": None, "Mode": "Dynamic"})
    assert dict(opts) == {"scan.snapshot-id": "3", "mode": "Dynamic"}
    assert "SCAN.snapshot-id" in opts and opts["Scan.Snapshot-Id"] == "3" and 3 not in opts
    assert OptionMap.of(opts) is opts and len(opts.without("MODE")) == 1
    assert lower_keys(None) == {}


def test_spellings_typed_values_and_their_errors() -> None:
    opts = OptionMap.of({"versionAsOf": "3", "scan.version": "3", "flag": "TRUE", "mode": " Static "})
    assert opts.first("version", "scan.version", "versionasof") == ("scan.version", "3")
    assert opts.first("absent") is None
    assert opts.flag("flag") is True and opts.flag("other", default=True) is True
    assert opts.choice("mode", ("static", "dynamic"), "dynamic") == "static"
    with pytest.raises(OptionsError, match=r"option 'versionasof': conflicts with 'scan.version'"):
        OptionMap.of({"scan.version": "3", "versionAsOf": "4"}).first("scan.version", "versionasof")
    with pytest.raises(OptionsError, match=r"option 'mergeSchema': must be one of true, false, got 'yes'"):
        OptionMap.of({"mergeschema": "yes"}).flag("mergeschema", name="mergeSchema")
    with pytest.raises(OptionsError, match=r"option 'pushdwn': unknown read option \(did you mean 'pushdown'\?\)"):
        OptionMap.of({"pushdwn": "true"}).check_known(["pushdown", "path"], what="read option")
    OptionMap.of({"storage.key": "k"}).check_known(["path"], ("storage.",))


def test_unknown_keys_get_a_suggestion_and_paimon_options_say_they_are_unsupported() -> None:
    assert str(unknown_option("bukcet", TABLE_OPTION_KEYS)) == (
        "option 'bukcet': unknown option (did you mean 'bucket'?)"
    )
    assert "did you mean" not in str(unknown_option("zzzz", TABLE_OPTION_KEYS))
    for key in ("row-tracking.enabled", "commit.callbacks", "Tag.Automatic-Creation"):
        message = str(unknown_option(key, TABLE_OPTION_KEYS))
        assert message == f"option '{key}': Paimon option '{key}' is not supported by mergetable"
    assert not PAIMON_UNSUPPORTED_OPTIONS & TABLE_OPTION_KEYS  # nothing mergetable supports is on the list


def test_table_options_suggest_and_name_unsupported_paimon_options() -> None:
    with pytest.raises(OptionsError, match=r"'merge-engin'.*unknown option \(did you mean 'merge-engine'\?\)") as info:
        TableOptions.from_map({"merge-engin": "first-row"})
    assert info.value.option == "merge-engin"
    with pytest.raises(OptionsError, match=r"Paimon option 'row-tracking\.enabled' is not supported") as info:
        TableOptions.from_map({"row-tracking.enabled": "true"})
    assert info.value.option == "row-tracking.enabled"


def test_write_options_suggest_write_and_table_options() -> None:
    with pytest.raises(OptionsError, match=r"'primary-kye': unknown option \(did you mean 'primary-key'\?\)"):
        WriteOptions.parse({"path": "/t", "primary-kye": "id"}, ["id"])
    with pytest.raises(OptionsError, match=r"'row-tracking\.enabled': Paimon option .* is not supported"):
        WriteOptions.parse({"path": "/t", "Row-Tracking.Enabled": "true"}, ["id"])
    assert WriteOptions.parse({"PATH": "/t", "Primary-Key": "id", "Bucket": "2"}, ["id"]).table_options == {
        "bucket": "2"
    }


def test_read_request_reads_its_options_through_the_map() -> None:
    request = ReadRequest.from_options({"VersionAsOf": "2", "Columns": "a,b"})
    assert request.travel.version == "2" and request.columns == ("a", "b")
    assert request.source == ("versionasof", "2")


def test_one_check_of_a_tables_columns() -> None:
    schema = TableSchema.create(pa.schema([("id", pa.int64()), ("amount", pa.float64())]), ["id"])
    assert schema.field("amount").name == "amount" and check_column("id", schema.column_names) == "id"
    with pytest.raises(SchemaError, match=r"column 'amout': column is not in the table schema \['id', 'amount'\] "
                       r"\(did you mean 'amount'\?\)") as info:  # fmt: skip
        schema.field("amout")
    assert info.value.column == "amout"
    with pytest.raises(SchemaChangeError, match="'x': filter column is not in the table schema"):
        check_column("x", ["id"], "filter column", SchemaChangeError)
