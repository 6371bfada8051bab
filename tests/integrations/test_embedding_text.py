"""The item embedding text (papers/000 §3.1, Appendix B): layout, field lookup, serialization, hash."""

from __future__ import annotations

import hashlib
import json

import pytest

from evalplan.core.embedding.embedding_text import field_value, has_text, item_text, serialize_value, text_hash


def test_prompt_then_target_separated_by_a_blank_line() -> None:
    assert item_text("What is 2+2?", "4", None, []) == "What is 2+2?\n\n4"


def test_prompt_only_when_no_target_and_no_fields() -> None:
    assert item_text("Say hi.", None, {"solution": "hi"}, []) == "Say hi."
    assert item_text("Say hi.", "", None, None) == "Say hi."


def test_configured_fields_follow_in_configured_order_with_labels() -> None:
    fields = {"b": "second", "a": "first", "unused": "never"}
    text = item_text("P", "T", fields, ["a", "b"])
    assert text == "P\n\nT\n\na: first\n\nb: second"
    assert item_text("P", "T", fields, ["b", "a"]) == "P\n\nT\n\nb: second\n\na: first"


def test_structured_fields_are_compact_sorted_json() -> None:
    fields = {"kwargs": [{"num_words": 300, "relation": "at least"}, None],
              "instruction_id_list": ["length_constraints:number_words"], "n": 3, "flag": True,
              "text": "caf\u00e9"}
    text = item_text("Write an essay.", None, fields, ["instruction_id_list", "kwargs", "n", "flag", "text"])
    assert text.split("\n\n") == [
        "Write an essay.",
        'instruction_id_list: ["length_constraints:number_words"]',
        'kwargs: [{"num_words":300,"relation":"at least"},null]',
        "n: 3",
        "flag: true",
        "text: caf\u00e9",
    ]


def test_format_differences_stay_visible() -> None:
    """Two answers that flatten to the same words but differ in structure get different texts."""
    a = item_text("Q", None, {"gt": {"name": "f", "args": ["x"]}}, ["gt"])
    b = item_text("Q", None, {"gt": {"name": "f", "args": "x"}}, ["gt"])
    assert a != b and text_hash(a) != text_hash(b)


def test_key_order_of_objects_does_not_matter() -> None:
    a = item_text("Q", None, {"gt": {"x": 1, "y": 2}}, ["gt"])
    b = item_text("Q", None, {"gt": {"y": 2, "x": 1}}, ["gt"])
    assert a == b


def test_dotted_paths_reach_nested_objects() -> None:
    fields = {"rubric": {"ground_truth": [{"fn": "get_weather", "city": "Paris"}], "other": 1}}
    text = item_text("Call the tool.", None, fields, ["rubric.ground_truth"])
    assert text == 'Call the tool.\n\nrubric.ground_truth: [{"city":"Paris","fn":"get_weather"}]'


def test_a_literal_dotted_key_wins_over_the_path() -> None:
    fields = {"a.b": "literal", "a": {"b": "nested"}}
    assert field_value(fields, "a.b") == "literal"
    assert field_value({"a": {"b": "nested"}}, "a.b") == "nested"


def test_absent_or_null_fields_are_left_out() -> None:
    fields = {"present": "yes", "null": None, "a": {"b": 1}}
    text = item_text("P", None, fields, ["missing", "null", "present", "a.c", "a.b.c", "present.x"])
    assert text == "P\n\npresent: yes"
    assert item_text("P", None, None, ["present"]) == "P"


def test_falsy_but_present_values_are_kept() -> None:
    text = item_text("P", None, {"zero": 0, "empty": [], "no": False, "blank": ""}, ["zero", "empty", "no", "blank"])
    assert text.split("\n\n") == ["P", "zero: 0", "empty: []", "no: false", "blank: "]


def test_serialize_value() -> None:
    assert serialize_value("as is\n") == "as is\n"
    assert serialize_value({"b": [1, 2.5], "a": "\u00e9"}) == '{"a":"\u00e9","b":[1,2.5]}'
    assert serialize_value(None) == "null"


def test_score_only_items_have_no_text() -> None:
    assert not has_text(None)
    assert has_text("")
    with pytest.raises(ValueError):
        item_text(None, "4", None, [])


def test_empty_prompt_is_text() -> None:
    assert item_text("", "4", None, []) == "4"
    assert item_text("", None, None, []) == ""


def test_text_hash_is_sha256_of_utf8() -> None:
    text = "Janet\u2019s ducks"
    assert text_hash(text) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert len(text_hash("")) == 64
    assert text_hash("a") != text_hash("a ")


def test_shared_data_layout_example() -> None:
    """An item in the layout of ``shared/data/*/items.jsonl`` with its worked solution as a field."""
    row = json.loads('{"id": "1", "prompt": "A robe takes 2 bolts.", "target": "3", '
                     '"fields": {"solution": "2/2=1\\n#### 3"}}')
    assert item_text(row["prompt"], row["target"], row["fields"], ["solution"]) == \
        "A robe takes 2 bolts.\n\n3\n\nsolution: 2/2=1\n#### 3"
