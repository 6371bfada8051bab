"""Unit tests for the lm-evaluation-harness samples-log parser (pure, no DB, no web)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalplan.integrations.lm_eval import (
    LmEvalTaskLog,
    compact_json,
    parse_samples,
    task_from_filename,
)
from evalplan.kit.errors import InvalidInput

try:  # tests/ is a rootdir-relative directory, or a package if someone adds __init__.py
    from support.lm_eval_logs import (
        DEFAULT_DATE,
        hash_string,
        make_docs,
        records_to_bytes,
        samples_filename,
        samples_log_bytes,
        samples_log_records,
        write_samples_log,
    )
except ImportError:  # pragma: no cover
    from tests.support.lm_eval_logs import (  # type: ignore[no-redef]
        DEFAULT_DATE,
        hash_string,
        make_docs,
        records_to_bytes,
        samples_filename,
        samples_log_bytes,
        samples_log_records,
        write_samples_log,
    )

TASK = "arc_easy"
FNAME = samples_filename(TASK)


def parse_records(records: list[dict[str, Any]], **kwargs: Any) -> LmEvalTaskLog:
    return parse_samples(FNAME, records_to_bytes(records).splitlines(keepends=True), **kwargs)


def parse_lines(lines: list[str], **kwargs: Any) -> LmEvalTaskLog:
    return parse_samples(FNAME, lines, **kwargs)


def record_lines(records: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(r) + "\n" for r in records]


def expect_invalid(fn: Any, *args: Any, **kwargs: Any) -> InvalidInput:
    with pytest.raises(InvalidInput) as info:
        fn(*args, **kwargs)
    return info.value


# --------------------------------------------------------------------------- file names


@pytest.mark.parametrize(
    ("filename", "task"),
    [
        ("samples_arc_easy_2024-06-26T12-00-00.123456.jsonl", "arc_easy"),
        (
            "samples_leaderboard_musr_murder_mysteries_2024-06-26T12-00-00.123456.jsonl",
            "leaderboard_musr_murder_mysteries",
        ),
        ("samples_mmlu_abstract_algebra_2024-11-02T08-59-31.jsonl", "mmlu_abstract_algebra"),
        ("samples_hendrycks_math.algebra_2024-06-26T12-00-00.5.jsonl", "hendrycks_math.algebra"),
        ("samples_gsm8k_2024-06-26T12-00-00.123456.jsonl", "gsm8k"),
        ("/runs/model__x/samples_arc_easy_2024-06-26T12-00-00.123456.jsonl", "arc_easy"),
        ("C:\\runs\\samples_boolq_2024-06-26T12-00-00.123456.jsonl", "boolq"),
    ],
)
def test_task_from_filename(filename: str, task: str) -> None:
    assert task_from_filename(filename) == task


@pytest.mark.parametrize(
    "filename",
    [
        "results_2024-06-26T12-00-00.123456.json",
        "samples_arc_easy.jsonl",
        "samples_arc_easy_2024-06-26.jsonl",
        "samples__2024-06-26T12-00-00.123456.jsonl",
        "samples_arc_easy_2024-06-26T12:00:00.123456.jsonl",
        "samples_arc_easy_2024-06-26T12-00-00.123456.json",
        "arc_easy_2024-06-26T12-00-00.123456.jsonl",
        "",
    ],
)
def test_task_from_filename_rejects_bad_names(filename: str) -> None:
    err = expect_invalid(task_from_filename, filename)
    assert err.errors[0]["file"] == filename
    assert "samples_<task>_" in err.errors[0]["detail"]


def test_parse_samples_rejects_bad_filename_before_reading() -> None:
    def lines() -> Any:
        raise AssertionError("lines must not be read")
        yield ""  # pragma: no cover

    err = expect_invalid(parse_samples, "arc_easy.jsonl", lines())
    assert err.errors == [{"file": "arc_easy.jsonl", "detail": err.errors[0]["detail"]}]


# ------------------------------------------------------------------- generator fidelity


def test_generator_writes_harness_format(tmp_path: Path) -> None:
    docs = make_docs(3, seed=1)
    path = write_samples_log(tmp_path, "mmlu_abstract_algebra", docs, seed=2)
    assert path.name == f"samples_mmlu_abstract_algebra_{DEFAULT_DATE}.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    rec = json.loads(lines[0])
    assert list(rec)[:11] == [
        "doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter",
        "metrics", "doc_hash", "prompt_hash", "target_hash",
    ]  # fmt: skip
    assert rec["metrics"] == ["acc", "acc_norm"] and rec["filter"] == "none"
    assert set(rec["arguments"]) == {"gen_args_0", "gen_args_1", "gen_args_2", "gen_args_3"}
    context = rec["arguments"]["gen_args_0"]["arg_0"]
    assert context == f"Question: {docs[0]['question']}\nAnswer:"
    assert rec["arguments"]["gen_args_2"]["arg_1"] == " " + docs[0]["choices"][2]
    assert rec["target"] == str(docs[0]["answer"])
    assert rec["prompt_hash"] == hash_string(context)
    assert rec["target_hash"] == hash_string(str(docs[0]["answer"]))
    assert rec["doc_hash"] == hash_string(json.dumps(docs[0], indent=2, ensure_ascii=False))
    assert len(rec["resps"]) == 4 and rec["resps"][0][0][1] == "False"
    lls = [float(r[0]) for r in rec["filtered_resps"]]
    best = max(range(4), key=lambda i: lls[i])
    assert rec["acc"] == float(best == docs[0]["answer"])
    # deterministic from the seed
    assert samples_log_bytes("t", docs, seed=2) == samples_log_bytes("t", docs, seed=2)
    assert samples_log_bytes("t", docs, seed=2) != samples_log_bytes("t", docs, seed=3)


# ------------------------------------------------------------------ argument forms


def test_parse_dict_form(tmp_path: Path) -> None:
    docs = make_docs(6, seed=3)
    path = write_samples_log(tmp_path, TASK, docs, seed=4)
    records = samples_log_records(TASK, docs, seed=4)
    with path.open("rb") as fh:  # streams a binary file object line by line
        log = parse_samples(str(path), fh)
    assert log.task == TASK and log.filename == str(path)
    assert log.metric == "acc" and log.filter == "none"
    assert [i.doc_id for i in log.items] == list(range(6))
    for item, doc, rec in zip(log.items, docs, records, strict=True):
        assert item.prompt == f"Question: {doc['question']}\nAnswer:"
        assert item.target == str(doc["answer"])
        assert item.fields == doc
        assert item.score == rec["acc"]
        assert isinstance(item.score, float)


def test_parse_list_form_keeps_int_target_as_text() -> None:
    docs = make_docs(4, seed=5)
    records = samples_log_records(TASK, docs, seed=6, arguments_form="list")
    assert isinstance(records[0]["arguments"], list)
    assert isinstance(records[0]["target"], int)
    log = parse_records(records)
    assert [i.prompt for i in log.items] == [f"Question: {d['question']}\nAnswer:" for d in docs]
    assert [i.target for i in log.items] == [str(d["answer"]) for d in docs]
    assert [i.score for i in log.items] == [r["acc"] for r in records]


def test_parse_generate_until() -> None:
    docs = make_docs(5, seed=7)
    data = samples_log_bytes(TASK, docs, kind="generate_until", seed=8, filters=("none",))
    records = [json.loads(x) for x in data.splitlines()]
    assert records[0]["arguments"]["gen_args_0"]["arg_1"] == {
        "until": ["\n\n", "Question:"],
        "do_sample": False,
    }
    log = parse_samples(FNAME, data.decode().splitlines())  # str lines work too
    assert log.metric == "exact_match"
    for item, doc in zip(log.items, docs, strict=True):
        assert item.prompt.startswith(f"Question: {doc['question']}\nA. {doc['choices'][0]}")
        assert item.prompt.endswith("\nAnswer:")
        assert item.target == doc["choices"][doc["answer"]]
    assert [i.score for i in log.items] == [r["exact_match"] for r in records]


def test_parse_generate_until_list_form() -> None:
    docs = make_docs(3, seed=9)
    records = samples_log_records(TASK, docs, kind="generate_until", arguments_form="list")
    assert records[0]["arguments"][0][1]["until"] == ["\n\n", "Question:"]
    log = parse_records(records)
    assert log.items[1].prompt.startswith(f"Question: {docs[1]['question']}\n")
    assert log.items[1].target == docs[1]["choices"][docs[1]["answer"]]


def test_plain_string_arguments_and_list_targets() -> None:
    records = samples_log_records(TASK, make_docs(2, seed=1))
    records[0]["arguments"] = "just the prompt"
    records[1]["arguments"] = [["ctx one", " cont"]]
    records[1]["target"] = ["a", "b"]
    records[0]["target"] = {"z": 1, "a": [2]}
    log = parse_records(records)
    assert log.items[0].prompt == "just the prompt"
    assert log.items[1].prompt == "ctx one"
    assert log.items[0].target == '{"a":[2],"z":1}'
    assert log.items[1].target == '["a","b"]'


# ------------------------------------------------------------------------- metrics


def test_default_metric_is_first_of_metrics() -> None:
    docs = make_docs(20, seed=11)
    records = samples_log_records(TASK, docs, metrics=("acc_norm", "acc"), seed=12)
    log = parse_records(records)
    assert log.metric == "acc_norm"
    assert [i.score for i in log.items] == [r["acc_norm"] for r in records]


def test_explicit_metric() -> None:
    docs = make_docs(20, seed=11)
    records = samples_log_records(TASK, docs, seed=12)
    acc = [r["acc"] for r in records]
    acc_norm = [r["acc_norm"] for r in records]
    assert acc != acc_norm  # the seed gives a case where the choice matters
    assert [i.score for i in parse_records(records).items] == acc
    log = parse_records(records, metric="acc_norm")
    assert log.metric == "acc_norm"
    assert [i.score for i in log.items] == acc_norm


def test_unknown_metric_lists_available() -> None:
    records = samples_log_records(TASK, make_docs(3))
    err = expect_invalid(parse_records, records, metric="bleu")
    assert "'bleu'" in err.detail
    assert "acc, acc_norm" in err.detail
    assert FNAME in err.detail
    assert len(err.errors) == 1


def test_missing_metric_value_names_row_and_column() -> None:
    records = samples_log_records(TASK, make_docs(3))
    del records[1]["acc"]
    err = expect_invalid(parse_records, records)
    assert [(e["row"], e["column"]) for e in err.errors] == [(2, "acc")]


# ------------------------------------------------------------------------- filters


def test_multiple_filters_default_prefers_none() -> None:
    docs = make_docs(10, seed=13)
    records = samples_log_records(
        "gsm8k", docs, kind="generate_until", filters=("strict-match", "none"), seed=14
    )
    assert len(records) == 20  # one line per (doc, filter)
    log = parse_records(records)
    assert log.filter == "none"
    assert len(log.items) == 10
    assert [i.score for i in log.items] == [r["exact_match"] for r in records[10:]]


def test_multiple_filters_default_first_seen_and_explicit() -> None:
    docs = make_docs(30, seed=15)
    filters = ("strict-match", "flexible-extract")
    records = samples_log_records("gsm8k", docs, kind="generate_until", filters=filters, seed=16)
    strict = [r["exact_match"] for r in records[:30]]
    flexible = [r["exact_match"] for r in records[30:]]
    assert strict != flexible
    log = parse_records(records)
    assert log.filter == "strict-match"
    assert [i.score for i in log.items] == strict
    log = parse_records(records, filter="flexible-extract")
    assert log.filter == "flexible-extract"
    assert [i.score for i in log.items] == flexible
    assert [i.doc_id for i in log.items] == list(range(30))


def test_none_filter_appearing_late_wins_even_interleaved() -> None:
    records = samples_log_records(
        "gsm8k", make_docs(4), kind="generate_until", filters=("flexible-extract", "none")
    )
    interleaved = [r for pair in zip(records[:4], records[4:], strict=True) for r in pair]
    log = parse_records(interleaved)
    assert log.filter == "none"
    assert [i.score for i in log.items] == [r["exact_match"] for r in records[4:]]


def test_unknown_filter_lists_available() -> None:
    records = samples_log_records(
        "gsm8k", make_docs(2), kind="generate_until", filters=("strict-match", "none")
    )
    err = expect_invalid(parse_records, records, filter="majority")
    assert "'majority'" in err.detail and "strict-match, none" in err.detail


def test_errors_of_other_filters_are_ignored() -> None:
    records = samples_log_records(
        "gsm8k", make_docs(3), kind="generate_until", filters=("none", "strict-match")
    )
    records[4]["exact_match"] = "n/a"  # strict-match line
    assert parse_records(records).filter == "none"
    err = expect_invalid(parse_records, records, filter="strict-match")
    assert [(e["row"], e["column"]) for e in err.errors] == [(5, "exact_match")]


# ------------------------------------------------------------------------- errors


def test_duplicate_doc_id_names_row() -> None:
    records = samples_log_records(TASK, make_docs(5))
    records.append(dict(records[1]))  # doc_id 1 again, line 6
    err = expect_invalid(parse_records, records)
    assert len(err.errors) == 1
    assert err.errors[0]["row"] == 6 and err.errors[0]["column"] == "doc_id"
    assert "duplicate doc_id 1" in err.errors[0]["detail"]
    assert "row 2" in err.errors[0]["detail"]
    assert FNAME in err.detail


def test_invalid_json_line_names_row() -> None:
    lines = record_lines(samples_log_records(TASK, make_docs(4)))
    lines[2] = '{"doc_id": 2, "doc": \n'
    err = expect_invalid(parse_lines, lines)
    assert len(err.errors) == 1
    assert err.errors[0]["row"] == 3 and err.errors[0]["column"] is None
    assert err.errors[0]["detail"].startswith("invalid JSON: ")


def test_non_object_line_and_bad_utf8() -> None:
    lines: list[Any] = [x.encode() for x in record_lines(samples_log_records(TASK, make_docs(3)))]
    lines[0] = b"[1, 2]\n"
    lines[2] = b"\xff\xfe{}\n"
    err = expect_invalid(parse_samples, FNAME, lines)
    assert [(e["row"], e["column"]) for e in err.errors] == [(1, None), (3, None)]
    assert "JSON object" in err.errors[0]["detail"]
    assert "UTF-8" in err.errors[1]["detail"]


@pytest.mark.parametrize("bad", ["yes", None, [1.0], {"v": 1}, float("nan"), float("inf")])
def test_non_numeric_score_names_row_and_metric(bad: Any) -> None:
    records = samples_log_records(TASK, make_docs(5))
    records[3]["acc_norm"] = bad
    parse_records(records)  # acc is still fine
    err = expect_invalid(parse_records, records, metric="acc_norm")
    assert len(err.errors) == 1
    assert err.errors[0]["row"] == 4 and err.errors[0]["column"] == "acc_norm"


@pytest.mark.parametrize(
    ("field", "value", "column"),
    [
        ("doc_id", -1, "doc_id"),
        ("doc_id", "3", "doc_id"),
        ("doc_id", True, "doc_id"),
        ("doc_id", 1.5, "doc_id"),
        ("metrics", "acc", "metrics"),
        ("metrics", ["acc", 3], "metrics"),
        ("metrics", [], "metrics"),
        ("doc", ["not", "a", "dict"], "doc"),
        ("filter", 7, "filter"),
    ],
)
def test_field_validation(field: str, value: Any, column: str) -> None:
    records = samples_log_records(TASK, make_docs(3))
    records[1][field] = value
    err = expect_invalid(parse_records, records)
    assert [(e["row"], e["column"]) for e in err.errors] == [(2, column)]


def test_missing_metrics_field() -> None:
    records = samples_log_records(TASK, make_docs(3))
    del records[2]["metrics"]
    err = expect_invalid(parse_records, records)
    assert [(e["row"], e["column"]) for e in err.errors] == [(3, "metrics")]


def test_all_errors_collected_in_row_order() -> None:
    records = samples_log_records(TASK, make_docs(6))
    records[4]["acc"] = "x"
    records[1]["doc_id"] = -2
    records.append(dict(records[0]))
    lines = record_lines(records)
    lines[3] = "not json\n"
    err = expect_invalid(parse_lines, lines)
    assert [(e["row"], e["column"]) for e in err.errors] == [
        (2, "doc_id"),
        (4, None),
        (5, "acc"),
        (7, "doc_id"),
    ]
    assert err.n_errors == 4
    assert err.detail.startswith(f"invalid lm-evaluation-harness samples log '{FNAME}': 4 problem")


def test_empty_file_is_an_error() -> None:
    err = expect_invalid(parse_lines, [])
    assert "no records" in err.detail and err.errors[0]["file"] == FNAME
    err = expect_invalid(parse_lines, ["\n", "   \n", ""])
    assert "no records" in err.detail


def test_blank_lines_are_skipped_but_counted() -> None:
    lines = record_lines(samples_log_records(TASK, make_docs(3)))
    lines = ["\n", lines[0], "  \n", lines[1], lines[2].rstrip("\n")]
    assert [i.doc_id for i in parse_lines(lines).items] == [0, 1, 2]
    lines[3] = "{bad"
    err = expect_invalid(parse_lines, lines)
    assert err.errors[0]["row"] == 4


# ------------------------------------------------------------------ scores and prompts


def test_bool_scores() -> None:
    docs = make_docs(12, seed=17)
    records = samples_log_records(TASK, docs, seed=18, bool_scores=True)
    assert {type(r["acc"]) for r in records} == {bool}
    assert {r["acc"] for r in records} == {True, False}
    log = parse_records(records)
    assert [i.score for i in log.items] == [1.0 if r["acc"] else 0.0 for r in records]
    assert all(type(i.score) is float for i in log.items)
    assert log.all_binary is True


def test_int_scores_become_float() -> None:
    records = samples_log_records(TASK, make_docs(3), score_fn=lambda d, f, m: d)
    log = parse_records(records)
    assert [i.score for i in log.items] == [0.0, 1.0, 2.0]
    assert all(type(i.score) is float for i in log.items)


def test_all_binary_flag() -> None:
    docs = make_docs(4)
    assert parse_records(samples_log_records(TASK, docs)).all_binary is True
    records = samples_log_records(
        TASK, docs, metrics=("f1",), score_fn=lambda d, f, m: [0.0, 0.25, 1.0, 1.0][d]
    )
    log = parse_records(records)
    assert [i.score for i in log.items] == [0.0, 0.25, 1.0, 1.0]
    assert log.all_binary is False


def test_fallback_prompt_from_doc() -> None:
    docs = [
        {"question": "What is 2+2?", "choices": ["3", "4"], "answer": 1},
        {"input": "", "problem": "Solve x", "text": "later"},
        {"passage": "no known key", "answer": 0},
        {"query": "q?", "prompt": "p!"},
    ]
    records = samples_log_records(TASK, make_docs(4))
    for rec, doc in zip(records, docs, strict=True):
        rec["doc"] = doc
    del records[0]["arguments"]
    records[1]["arguments"] = {}
    records[2]["arguments"] = [[]]
    records[3]["arguments"] = {"gen_args_0": {"arg_0": ""}}
    log = parse_records(records)
    assert [i.prompt for i in log.items] == [
        "What is 2+2?",
        "Solve x",
        compact_json(docs[2]),
        "p!",
    ]
    assert compact_json(docs[2]) == '{"answer":0,"passage":"no known key"}'
    assert log.items[2].fields == docs[2]


def test_items_sorted_by_doc_id() -> None:
    docs = make_docs(15, seed=19)
    records = samples_log_records(TASK, docs, seed=20, shuffle=True)
    file_order = [r["doc_id"] for r in records]
    assert file_order != sorted(file_order)
    log = parse_records(records)
    assert [i.doc_id for i in log.items] == list(range(15))
    by_id = {r["doc_id"]: r for r in records}
    assert [i.score for i in log.items] == [by_id[i.doc_id]["acc"] for i in log.items]
    assert [i.fields for i in log.items] == docs


def test_sparse_doc_ids_are_kept() -> None:
    records = samples_log_records(TASK, make_docs(3))
    for rec, doc_id in zip(records, (40, 7, 1000), strict=True):
        rec["doc_id"] = doc_id
    assert [i.doc_id for i in parse_records(records).items] == [7, 40, 1000]
