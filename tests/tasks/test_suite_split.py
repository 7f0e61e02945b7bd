"""Training and held-out tasks do not mix unless asked: the env draws a suite's train split,
`repogym eval` its eval split, and a split a suite lacks is an error that names what it has."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import gymnasium as gym
import pytest

import repogym  # noqa: F401 - registers the env
from repogym.agents.evaluation.runner import EvalConfig, select_tasks
from repogym.errors import TaskError
from repogym.schema import Task
from repogym.scripts.cli import build_parser
from repogym.scripts.eval_cmd import config_from_args
from repogym.suite import load_suite, select


def test_the_demo_suite_holds_both_splits() -> None:
    assert Counter(t.split for t in load_suite("demo")) == {"eval": 10, "train": 5}
    assert {t.split for t in load_suite("adversarial")} == {"adversarial"}


def test_env_draws_only_train_tasks_from_a_suite_by_default() -> None:
    env = gym.make("repogym/SWE-v0", suite="demo")  # starts no container
    try:
        assert env.unwrapped.split == "train"
        assert {t.split for t in env.unwrapped.tasks} == {"train"}
        assert len(env.unwrapped.tasks) == 5
    finally:
        env.close()
    for split, n in (("eval", 10), ("all", 15)):
        env = gym.make("repogym/SWE-v0", suite="demo", split=split)
        assert len(env.unwrapped.tasks) == n
        env.close()


def test_a_suite_without_train_tasks_says_which_splits_it_has() -> None:
    held = len(load_suite("adversarial"))  # the suite grows with the attacks
    with pytest.raises(TaskError, match=rf"no 'train' tasks \(it holds adversarial: {held}\).*"
                                        r"'adversarial', or 'all'"):
        gym.make("repogym/SWE-v0", suite="adversarial")
    with pytest.raises(TaskError, match="use one of train, eval, adversarial, all"):
        load_suite("demo", "test")


def test_tasks_given_are_used_as_they_are_unless_a_split_is_named(toy_task: Task) -> None:
    trained = replace(toy_task, instance_id="toy__calc-2", split="train")
    env = gym.make("repogym/SWE-v0", tasks=[toy_task, trained])
    assert len(env.unwrapped.tasks) == 2
    env.close()
    env = gym.make("repogym/SWE-v0", tasks=[toy_task, trained], split="train")
    assert [t.instance_id for t in env.unwrapped.tasks] == ["toy__calc-2"]
    env.close()


def test_eval_runs_the_eval_split_by_default() -> None:
    args = build_parser(["eval"]).parse_args(["eval", "--suite", "demo", "--agent", "null"])
    config = config_from_args(args)
    assert config.split == "eval"  # written to config.json as it is
    assert {t.split for t in select_tasks(config)} == {"eval"}
    assert len(select_tasks(EvalConfig(suite="demo", agent="null"))) == 10
    assert len(select_tasks(EvalConfig(suite="demo", agent="null", split="all"))) == 15


def test_select_by_id_names_close_matches() -> None:
    tasks = load_suite("demo")
    assert [t.instance_id for t in select(tasks, "all", ["demo__textkit-5"])] == [
        "demo__textkit-5"]
    with pytest.raises(TaskError, match="among its 'eval' tasks; close matches: demo__textkit"):
        select(tasks, "eval", ["demo__textkit-9"])


def test_a_task_of_another_split_says_where_it_is_and_how_to_get_it() -> None:
    """#35: 'no task demo__textkit-1 in this env's tasks; close matches: ...' did not say that
    it is in the eval split."""
    env = gym.make("repogym/SWE-v0", suite="demo", sandbox="fake")  # the train split
    with pytest.raises(TaskError) as err:
        env.reset(options={"task_id": "demo__textkit-1"})
    env.close()
    assert "is in split 'eval' of suite 'demo'" in str(err.value)
    assert "split='eval'" in str(err.value) and "'all'" in str(err.value)
    with pytest.raises(TaskError, match="is in split 'train'.*--split train"):
        select(load_suite("demo"), "eval", ["demo__textkit-5"])  # `--task` of a command
    given = gym.make("repogym/SWE-v0", tasks=load_suite("demo"), split="train", sandbox="fake")
    with pytest.raises(TaskError, match="is in split 'eval' of the tasks given"):
        given.reset(options={"task_id": "demo__minicalc-1"})
    given.close()
