"""Unit tests of evalplan.benchmarks.score_formats: parsing with located errors, and writing (no database)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from evalplan.benchmarks.score_formats import format_score, parse_long_json, parse_wide_csv, write_wide_csv
from evalplan.core.benchmarks.score_scale import ScoreScale
from evalplan.kit.errors import InvalidInput

UNIT = ScoreScale("continuous", 0.0, 1.0)
BINARY = ScoreScale("binary", 0.0, 1.0)
UNBOUNDED = ScoreScale("continuous", None, None)


def wide_error(text: str, scale: ScoreScale = UNIT) -> InvalidInput:
    with pytest.raises(InvalidInput) as info:
        parse_wide_csv(text.encode(), scale)
    assert info.value.status == 422
    assert info.value.errors, "an invalid upload must report located errors"
    return info.value


def long_error(records: object, scale: ScoreScale = UNIT) -> InvalidInput:
    with pytest.raises(InvalidInput) as info:
        parse_long_json(json.dumps(records).encode(), scale)
    assert info.value.errors
    return info.value


# ---------------------------------------------------------------- wide CSV: valid


def test_parse_wide_values_and_missing() -> None:
    upload = parse_wide_csv(b"model,a,b,c\nm1,1,0,\nm2,0.5,,0.123456\n", UNIT)
    assert upload.model_names == ["m1", "m2"]
    assert upload.item_ids == ["a", "b", "c"]
    assert upload.values.shape == (2, 3)
    assert upload.values[0, 0] == 1.0 and upload.values[0, 1] == 0.0
    assert math.isnan(upload.values[0, 2]) and math.isnan(upload.values[1, 1])
    assert upload.values[1, 0] == 0.5 and upload.values[1, 2] == 0.123456
    assert upload.n_scores == 4


def test_parse_wide_bom_crlf_whitespace_and_blank_lines() -> None:
    upload = parse_wide_csv("\ufeffmodel, a ,b\r\n m1 , 1 ,0.25\r\n\r\nm2,,1\r\n".encode(), UNIT)
    assert upload.model_names == ["m1", "m2"]
    assert upload.item_ids == ["a", "b"]
    assert upload.values[0].tolist() == [1.0, 0.25]
    assert math.isnan(upload.values[1, 0]) and upload.values[1, 1] == 1.0


def test_parse_wide_header_only() -> None:
    upload = parse_wide_csv(b"model,a,b\n", UNIT)
    assert upload.model_names == [] and upload.item_ids == ["a", "b"]
    assert upload.values.shape == (0, 2)


def test_parse_wide_unbounded_scale_accepts_large_and_negative() -> None:
    upload = parse_wide_csv(b"model,a,b\nm1,59.3,-2\n", UNBOUNDED)
    assert upload.values[0].tolist() == [59.3, -2.0]


# ---------------------------------------------------------------- wide CSV: errors located


def test_header_must_start_with_model() -> None:
    err = wide_error("name,a\nm1,1\n")
    assert err.errors[0]["row"] == 1
    assert err.errors[0]["column"] == "name"


def test_empty_csv() -> None:
    err = wide_error("")
    assert err.errors[0]["row"] == 1


def test_duplicate_item_column() -> None:
    err = wide_error("model,a,b,a\nm1,1,0,1\n")
    assert err.errors[0]["row"] == 1
    assert err.errors[0]["column"] == "a"


def test_empty_item_id_in_header() -> None:
    err = wide_error("model,a,,b\nm1,1,0,1\n")
    assert err.errors[0]["row"] == 1
    assert err.errors[0]["column"] == 3


def test_too_long_item_id_in_header() -> None:
    err = wide_error("model,a," + "x" * 201 + "\nm1,1,0\n")
    assert err.errors[0]["row"] == 1
    assert err.errors[0]["column"] == 3


def test_too_long_model_name() -> None:
    err = wide_error("model,a\nm1,1\n" + "m" * 301 + ",0\n")
    assert err.errors[0]["row"] == 3
    assert err.errors[0]["column"] == "model"


def test_ragged_short_row_names_row_and_first_missing_column() -> None:
    err = wide_error("model,a,b,c\nm1,1,0,1\nm2,1\n")
    assert err.errors[0]["row"] == 3
    assert err.errors[0]["column"] == "b"
    assert "expected 4 fields, found 2" in err.errors[0]["detail"]


def test_ragged_long_row_names_row_and_first_extra_column() -> None:
    err = wide_error("model,a,b\nm1,1,0,1\n")
    assert err.errors[0]["row"] == 2
    assert err.errors[0]["column"] == 4


def test_non_numeric_cell() -> None:
    err = wide_error("model,a,b\nm1,1,0\nm2,x,1\n")
    assert err.errors[0] == {"row": 3, "column": "a", "model": "m2", "detail": "score must be a number, got 'x'"}


@pytest.mark.parametrize("cell", ["nan", "NaN", "inf", "-inf", "Infinity", "1e999"])
def test_non_finite_cell(cell: str) -> None:
    err = wide_error(f"model,a,b\nm1,1,{cell}\n", UNBOUNDED)
    assert err.errors[0]["row"] == 2
    assert err.errors[0]["column"] == "b"
    assert "finite" in err.errors[0]["detail"]


def test_out_of_range_continuous() -> None:
    err = wide_error("model,a,b\nm1,1,1.5\nm2,-0.1,0\n")
    assert [(e["row"], e["column"]) for e in err.errors] == [(2, "b"), (3, "a")]
    assert "above" in err.errors[0]["detail"] and "below" in err.errors[1]["detail"]
    assert err.n_errors == 2


def test_binary_rejects_half() -> None:
    err = wide_error("model,a,b\nm1,1,0.5\n", BINARY)
    assert (err.errors[0]["row"], err.errors[0]["column"]) == (2, "b")
    assert "0 or 1" in err.errors[0]["detail"]


def test_duplicate_model_row() -> None:
    err = wide_error("model,a\nm1,1\nm2,0\nm1,0\n")
    assert err.errors[0]["row"] == 4
    assert err.errors[0]["column"] == "model"
    assert "first at row 2" in err.errors[0]["detail"]


def test_empty_model_name() -> None:
    err = wide_error("model,a\n,1\n")
    assert (err.errors[0]["row"], err.errors[0]["column"]) == (2, "model")


def test_rows_count_blank_lines() -> None:
    err = wide_error("model,a\n\nm1,1\n\nm2,abc\n")
    assert err.errors[0]["row"] == 5


def test_malformed_quoting() -> None:
    err = wide_error('model,a\nm1,"1"x\n')
    assert err.errors[0]["row"] == 2


def test_not_utf8() -> None:
    with pytest.raises(InvalidInput):
        parse_wide_csv(b"model,a\n\xff\xfe,1\n", UNIT)


def test_all_errors_are_collected_and_summary_names_first() -> None:
    err = wide_error("model,a,b\nm1,x,y\nm2,2,1\n")
    assert [(e["row"], e["column"]) for e in err.errors] == [(2, "a"), (2, "b"), (3, "a")]
    assert "row 2" in err.detail and "column a" in err.detail


# ---------------------------------------------------------------- long JSON


def test_parse_long_json() -> None:
    upload = parse_long_json(json.dumps([
        {"model": "m1", "item": "a", "score": 1},
        {"model": "m2", "item": "b", "score": 0.25},
        {"model": "m1", "item": 7, "score": 0},
    ]).encode(), UNIT)
    assert upload.model_names == ["m1", "m2"]
    assert upload.item_ids == ["a", "b", "7"]
    assert upload.values[0, 0] == 1.0 and upload.values[0, 2] == 0.0 and upload.values[1, 1] == 0.25
    assert math.isnan(upload.values[0, 1]) and math.isnan(upload.values[1, 0])
    assert upload.n_scores == 3


def test_parse_long_json_wrapped_in_scores_key() -> None:
    upload = parse_long_json(b'{"scores": [{"model": "m", "item": "i", "score": 1}]}', UNIT)
    assert upload.model_names == ["m"] and upload.values.tolist() == [[1.0]]


def test_long_duplicate_cell() -> None:
    err = long_error([{"model": "m1", "item": "a", "score": 1}, {"model": "m1", "item": "a", "score": 0}])
    assert (err.errors[0]["row"], err.errors[0]["column"]) == (1, "item")
    assert "first at row 0" in err.errors[0]["detail"]


@pytest.mark.parametrize("score", ["0.5", None, True, [1], {"v": 1}])
def test_long_bad_score_type(score: object) -> None:
    err = long_error([{"model": "m1", "item": "a", "score": 1}, {"model": "m1", "item": "b", "score": score}])
    assert (err.errors[0]["row"], err.errors[0]["column"]) == (1, "score")


def test_long_missing_score_and_model() -> None:
    err = long_error([{"model": "m1", "item": "a"}, {"item": "b", "score": 1}])
    assert (err.errors[0]["row"], err.errors[0]["column"]) == (0, "score")
    assert (err.errors[1]["row"], err.errors[1]["column"]) == (1, "model")


def test_long_out_of_range_and_binary() -> None:
    err = long_error([{"model": "m1", "item": "a", "score": 1.5}])
    assert (err.errors[0]["row"], err.errors[0]["column"]) == (0, "score")
    err = long_error([{"model": "m1", "item": "a", "score": 0.5}], BINARY)
    assert (err.errors[0]["row"], err.errors[0]["column"]) == (0, "score")


def test_long_not_a_list_and_malformed() -> None:
    with pytest.raises(InvalidInput):
        parse_long_json(b'{"model": "m"}', UNIT)
    with pytest.raises(InvalidInput):
        parse_long_json(b"[{", UNIT)
    err = long_error([1])
    assert err.errors[0]["row"] == 0


def test_long_too_long_names() -> None:
    err = long_error([{"model": "m1", "item": "x" * 201, "score": 1}])
    assert (err.errors[0]["row"], err.errors[0]["column"]) == (0, "item")
    err = long_error([{"model": "m" * 301, "item": "a", "score": 1}])
    assert (err.errors[0]["row"], err.errors[0]["column"]) == (0, "model")


# ---------------------------------------------------------------- writing


@pytest.mark.parametrize("value, text", [
    (1.0, "1"), (0.0, "0"), (0.5, "0.5"), (0.123456, "0.123456"), (100.0, "100"), (-2.0, "-2"),
    (0.1 + 0.2, "0.30000000000000004"), (1 / 3, "0.3333333333333333"), (1e-7, "1e-07"), (1e16, "1e+16"),
    (math.nan, ""),
])
def test_format_score(value: float, text: str) -> None:
    assert format_score(value) == text
    if text:
        assert float(text) == value


def test_write_wide_csv_exact() -> None:
    values = np.array([[1.0, 0.0, math.nan], [0.5, math.nan, 0.123456]])
    text = write_wide_csv(["m1", "org/m,2"], ["a", "b c", 'q"x'], values)
    assert text == 'model,a,b c,"q""x"\nm1,1,0,\n"org/m,2",0.5,,0.123456\n'


def test_write_then_parse_round_trip() -> None:
    rng = np.random.default_rng(0)
    values = rng.random((4, 6))
    values[rng.random((4, 6)) < 0.3] = math.nan
    values[0, 0] = 1.0
    models, items = [f"m{i}" for i in range(4)], [f"item,{j}" for j in range(6)]
    text = write_wide_csv(models, items, values)
    upload = parse_wide_csv(text.encode(), UNIT)
    assert upload.model_names == models and upload.item_ids == items
    assert np.array_equal(upload.values, values, equal_nan=True)
    assert write_wide_csv(upload.model_names, upload.item_ids, upload.values) == text


def test_write_empty_matrix() -> None:
    assert write_wide_csv([], ["a", "b"], np.zeros((0, 2))) == "model,a,b\n"


def test_nul_in_names_is_rejected() -> None:
    err = long_error([{"model": "m\u0000x", "item": "a", "score": 1}])
    assert (err.errors[0]["row"], err.errors[0]["column"]) == (0, "model")
    err = long_error([{"model": "m", "item": "a\u0000", "score": 1}])
    assert (err.errors[0]["row"], err.errors[0]["column"]) == (0, "item")


FAST_BODIES = [
    "model,a,b,c\nm1,0.1,,1\nm2,1e-3,0.30000000000000004,\n",
    "\ufeffmodel,a,b\r\nm1,0,1\r\n\r\nm2,1,0\r\n",
    'model,a,b\n"m,1",0.5,"0.25"\n" m2 ",,""\n',
    "model,x\n123,0.5\n",
]


@pytest.mark.parametrize("body", FAST_BODIES)
def test_the_arrow_parse_equals_the_line_parse(body: str) -> None:
    """The fast (Arrow) parse of a good body gives what the line parser gives, bit for bit."""
    from evalplan.benchmarks.score_formats import _parse_wide_csv_fast, _parse_wide_csv_lines  # noqa: PLC0415

    fast = _parse_wide_csv_fast(body.encode(), UNIT)
    assert fast is not None
    slow = _parse_wide_csv_lines(body.encode(), UNIT)
    assert (fast.model_names, fast.item_ids) == (slow.model_names, slow.item_ids)
    assert fast.values.tobytes() == slow.values.tobytes()


def test_the_arrow_parse_matches_on_random_matrices() -> None:
    from evalplan.benchmarks.score_formats import _parse_wide_csv_fast, _parse_wide_csv_lines  # noqa: PLC0415

    rng = np.random.default_rng(7)
    values = rng.random((50, 300))
    values[rng.random(values.shape) < 0.2] = np.nan
    body = write_wide_csv([f"m{i}" for i in range(50)], [f"q{j}" for j in range(300)], values).encode()
    fast = _parse_wide_csv_fast(body, UNIT)
    assert fast is not None and fast.values.tobytes() == values.tobytes()
    assert fast.values.tobytes() == _parse_wide_csv_lines(body, UNIT).values.tobytes()


@pytest.mark.parametrize("body", [
    "model,a\nm1,x\n", "model,a\nm1,nan\n", "model,a\nm1,2\n", "model,a\nm1,0.5\nm1,0.5\n", "model,a\n,0.5\n",
    "model,a\nm1,0.5,1\n", "model,a,a\nm1,0,1\n", 'model,"a"\nm1,1\n', "model,a\nm1,1_0\n", "model,a\nm1,inf\n",
])
def test_the_arrow_parse_declines_what_the_line_parser_must_explain(body: str) -> None:
    from evalplan.benchmarks.score_formats import _parse_wide_csv_fast  # noqa: PLC0415

    if body == 'model,"a"\nm1,1\n':  # a quoted header: the line parser reads it (no error)
        assert _parse_wide_csv_fast(body.encode(), UNIT) is None
        assert parse_wide_csv(body.encode(), UNIT).item_ids == ["a"]
        return
    assert _parse_wide_csv_fast(body.encode(), UNIT) is None
    wide_error(body)
