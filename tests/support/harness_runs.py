"""Test helper (not a test module): run the REAL harnesses offline on CPU and return what they wrote.

* :func:`inspect_log`: an inspect_ai eval with its ``mockllm`` model (outputs carry ``ModelUsage``,
  so nothing downloads tiktoken encodings) on a local dataset; returns the ``.eval`` log path.
* :func:`arith_samples`, :func:`arith_output`: the local dataset and the mock model's answers
  (correct unless ``i % 3 == 0``), so tests know each sample's score.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def arith_samples(n: int, prefix: str = "q") -> list[Any]:
    from inspect_ai.dataset import Sample

    return [Sample(id=f"{prefix}{i}", input=f"What is {i} plus {i}?", target=str(2 * i)) for i in range(n)]


def arith_correct(i: int) -> bool:
    return i % 3 != 0


def arith_output(input: list[Any], tools: Any, tool_choice: Any, config: Any) -> Any:  # noqa: A002
    """The mock model: reads ``i`` from the question and answers ``2i``, wrongly when ``i % 3 == 0``."""
    from inspect_ai.model import ModelOutput, ModelUsage

    i = int(input[-1].text.split()[2])
    out = ModelOutput.from_content(model="mockllm", content=str(2 * i) if arith_correct(i) else "no idea")
    out.usage = ModelUsage(input_tokens=6, output_tokens=1, total_tokens=7)
    return out


def mock_model() -> Any:
    from inspect_ai.model import get_model

    return get_model("mockllm/model", custom_outputs=arith_output)


def inspect_log(log_dir: Path, *, n: int = 45, task: str = "arith", epochs: int = 1, limit: int | None = None,
                log_format: str = "eval", scorers: tuple[str, ...] = ("match",)) -> Path:
    """Run a real inspect eval and return its log file."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.scorer import includes, match
    from inspect_ai.solver import generate

    made = {"match": match, "includes": includes}
    logs = inspect_eval(Task(name=task, dataset=arith_samples(n), solver=generate(),
                             scorer=[made[s]() for s in scorers], epochs=epochs),
                        model=mock_model(), log_dir=str(log_dir), log_format=log_format, display="none", limit=limit)
    assert logs[0].status == "success", logs[0].error
    return Path(logs[0].location)


def lighteval_details(out_dir: Path, *, splits: dict[str, int], task: str = "localarith|0",
                      model: str = "org/dummy") -> tuple[Path, Path, dict[str, float]]:
    """Write a details parquet and results JSON with lighteval's own ``EvaluationTracker`` and its
    ``loglikelihood_acc`` metric on local docs; returns (details, results, expected ``split/id`` -> acc).

    lighteval 0.13's ``Pipeline`` cannot run offline here: its task registry imports every built-in task
    module, one of which downloads tinyBenchmarks at import and another calls a huggingface_hub API
    removed in 1.x. The tracker, the ``Doc``/``ModelResponse`` records and the metric are lighteval's.
    """
    from lighteval.logging.evaluation_tracker import EvaluationTracker
    from lighteval.metrics.metrics import Metrics
    from lighteval.models.dummy.dummy_model import DummyModelConfig
    from lighteval.models.model_output import ModelResponse
    from lighteval.tasks.requests import Doc

    tracker = EvaluationTracker(output_dir=str(out_dir), save_details=True)
    tracker.general_config_logger.log_model_info(DummyModelConfig(model_name=model, seed=1))
    metric = Metrics.loglikelihood_acc.value
    expected: dict[str, float] = {}
    for split, n in splits.items():
        for i in range(n):
            doc = Doc(task_name=task, query=f"{split}: what is 2+{i}?", choices=[str(2 + i), str(3 + i)], gold_index=0,
                      id=str(i))
            response = ModelResponse(logprobs=[-0.1, -0.7] if i % 2 == 0 else [-0.8, -0.3], input=doc.query)
            values = metric.compute_sample(doc=doc, model_response=response)
            tracker.details_logger.log(task, doc, response, values)
            expected[f"{split}/{i}"] = float(values["acc"])
    tracker.save()
    details = next(out_dir.glob("details/**/details_*.parquet"))
    results = next(out_dir.glob("results/**/results_*.json"))
    return details, results, expected


def lighteval_generative_details(out_dir: Path, *, n: int, task: str = "localgen|0",
                                 model: str = "org/dummy-gen") -> tuple[Path, dict[str, str], dict[str, float]]:
    """Like :func:`lighteval_details` for a generative task: lighteval's ``EvaluationTracker`` writes the
    ``ModelResponse.text`` of each doc and lighteval's ``exact_match`` (``em``) scores it; the answer is right
    unless ``i % 3 == 0``. Returns (details, ``split/id`` -> the answer text, ``split/id`` -> em) for split
    ``test``."""
    from lighteval.logging.evaluation_tracker import EvaluationTracker
    from lighteval.metrics.metrics import Metrics
    from lighteval.models.dummy.dummy_model import DummyModelConfig
    from lighteval.models.model_output import ModelResponse
    from lighteval.tasks.requests import Doc

    tracker = EvaluationTracker(output_dir=str(out_dir), save_details=True)
    tracker.general_config_logger.log_model_info(DummyModelConfig(model_name=model, seed=1))
    metric = Metrics.exact_match.value
    answers: dict[str, str] = {}
    expected: dict[str, float] = {}
    for i in range(n):
        doc = Doc(task_name=task, query=f"what is 2+{i}?", choices=[str(2 + i)], gold_index=0, id=str(i))
        answer = str(2 + i) if i % 3 else f"I think it is {3 + i}"
        response = ModelResponse(text=[answer], input=doc.query)
        values = metric.compute_sample(doc=doc, model_response=response)
        tracker.details_logger.log(task, doc, response, values)
        answers[f"test/{i}"] = answer
        expected[f"test/{i}"] = float(values["em"])
    tracker.save()
    return next(out_dir.glob("details/**/details_*.parquet")), answers, expected


LM_EVAL_TASK = "evalplan_arith"


def lm_eval_task_dir(folder: Path, n: int = 48) -> Path:
    """A local lm-eval multiple-choice task ``evalplan_arith`` (``n`` docs in a JSONL file) for ``include_path``."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "arith.jsonl"
    with data.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"question": f"What is {i} plus {i}?", "choices": [str(2 * i), str(2 * i + 1), str(i)],
                                 "label": 0}) + "\n")
    (folder / f"{LM_EVAL_TASK}.yaml").write_text(
        f"task: {LM_EVAL_TASK}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\n"
        "test_split: test\noutput_type: multiple_choice\ndoc_to_text: \"{{question}}\"\n"
        "doc_to_choice: \"{{choices}}\"\ndoc_to_target: label\n"
        "metric_list:\n  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n")
    return folder


LM_EVAL_GEN_TASK = "evalplan_gen"


def lm_eval_generation_task_dir(folder: Path, n: int = 12) -> Path:
    """``evalplan_arith`` (multiple choice) and ``evalplan_gen`` (``generate_until`` on the same docs, scored by
    ``exact_match``) as local lm-eval tasks in ``folder`` for ``include_path``."""
    lm_eval_task_dir(folder, n)
    (folder / f"{LM_EVAL_GEN_TASK}.yaml").write_text(
        f"task: {LM_EVAL_GEN_TASK}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {folder / 'arith.jsonl'}\n"
        "test_split: test\noutput_type: generate_until\ndoc_to_text: \"{{question}}\"\n"
        "doc_to_target: \"{{choices[label]}}\"\ngeneration_kwargs:\n  until: [\"\\n\"]\n"
        "metric_list:\n  - metric: exact_match\n    aggregation: mean\n    higher_is_better: true\n")
    return folder
