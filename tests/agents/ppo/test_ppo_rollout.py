"""Rollouts: exact sampled ids, observation masks, reward placement, caps, parallel envs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import pytest
import torch

from repogym.agents.ppo.chat import ChatFormat
from repogym.agents.ppo.generation import HFGenerator
from repogym.agents.ppo.policy import tiny_model
from repogym.agents.ppo.rollout import EpisodeJob, Limits, collect_rollouts
from repogym.agents.ppo.toy_env import TOOLS, ToyTextEnv


@pytest.fixture()
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=4) as p:
        yield p


class SpyGenerator(HFGenerator):
    """The real generator, remembering what it returned and when it ran."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[list[list[int]], list[list[int]]]] = []
        self.windows: list[tuple[float, float]] = []

    def generate(self, prompts: list[list[int]], max_new_tokens: list[int]) -> list[list[int]]:
        start = time.perf_counter()
        out = super().generate(prompts, max_new_tokens)
        self.calls.append(([list(p) for p in prompts], out))
        self.windows.append((start, time.perf_counter()))
        return out


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


class ActionLog(ToyTextEnv):
    """The toy env, remembering the actions it received and when each step ran."""

    def __init__(self, delay: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delay = delay
        self.actions: list[str] = []
        self.windows: list[tuple[float, float]] = []

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        start = time.perf_counter()
        time.sleep(self.delay)
        self.actions.append(action)
        self.windows.append((start, time.perf_counter()))
        return super().step(action)


def jobs(n: int) -> list[EpisodeJob]:
    return [EpisodeJob(index=i, seed=100 + i, group=i) for i in range(n)]


def test_policy_ids_are_kept_exactly_and_observations_are_masked(tiny: Any, pool: Any) -> None:
    lm, tok = tiny
    gen, chat = SpyGenerator(lm, tok, temperature=1.0), ChatFormat(tok)
    envs = [ActionLog(turns=3) for _ in range(2)]
    rollout = collect_rollouts(envs, gen, chat, jobs(2), Limits(5, 6, 1024), pool)
    sampled = {tuple(p + o)
               for prompts, outs in gen.calls for p, o in zip(prompts, outs, strict=True)}
    for traj in rollout.trajectories:
        env = envs[traj.env]
        assert traj.terminated and not traj.cut and len(traj.turns) == 3
        pos = len(chat.prompt_ids(f"Task {traj.task_id}: write lowercase letters.", TOOLS))
        assert traj.policy_mask[:pos] == [0] * pos
        for i, turn in enumerate(traj.turns):
            ids = traj.tokens[pos:pos + turn.tokens]
            assert traj.policy_mask[pos:pos + turn.tokens] == [1] * turn.tokens
            assert tuple(traj.tokens[:pos + turn.tokens]) in sampled  # exact ids, not re-encoded
            assert env.actions[i] == tok.decode(ids, skip_special_tokens=True) == turn.action
            pos += turn.tokens
            if i < 2:
                obs = chat.observation_ids(turn.observation, ids[-1])
                assert traj.tokens[pos:pos + len(obs)] == obs
                assert traj.policy_mask[pos:pos + len(obs)] == [0] * len(obs)
                pos += len(obs)
        assert pos == len(traj.tokens)
    assert rollout.generated_tokens == sum(sum(t.policy_mask) for t in rollout.trajectories)


def test_reward_sits_on_the_last_policy_token(tiny: Any, pool: Any) -> None:
    lm, tok = tiny
    rollout = collect_rollouts([ToyTextEnv(turns=2)], HFGenerator(lm, tok, 1.0), ChatFormat(tok),
                               jobs(3), Limits(5, 6, 1024), pool)
    for traj in rollout.trajectories:
        last_policy = max(i for i, m in enumerate(traj.policy_mask) if m)
        assert last_policy == len(traj.tokens) - 1  # the episode ends on the policy's turn
        nonzero = [i for i, r in enumerate(traj.rewards) if r != 0.0]
        assert nonzero in ([], [last_policy])
        assert traj.rewards[last_policy] == pytest.approx(traj.turns[-1].reward)
        assert traj.reward == pytest.approx(traj.final_info["reward_components"]["score"])


def test_turn_and_token_caps_cut_the_episode(tiny: Any, pool: Any) -> None:
    lm, tok = tiny
    gen, chat = HFGenerator(lm, tok, 1.0), ChatFormat(tok)
    by_turns = collect_rollouts([ToyTextEnv(turns=9)], gen, chat, jobs(2),
                                Limits(max_turns=2, max_new_tokens=4, max_context=1024), pool)
    for traj in by_turns.trajectories:
        assert traj.cut == "max_turns" and not traj.terminated and len(traj.turns) == 2
        assert all(turn.tokens <= 4 for turn in traj.turns)
    prompt = len(chat.prompt_ids("Task toy-000: write lowercase letters.", TOOLS))
    context = prompt + 30
    by_context = collect_rollouts([ToyTextEnv(turns=9)], gen, chat, jobs(2),
                                  Limits(max_turns=50, max_new_tokens=8, max_context=context), pool)
    for traj in by_context.trajectories:
        assert traj.cut == "max_context" and not traj.terminated
        assert len(traj.tokens) <= context


def test_environment_truncation_is_a_cut_not_a_terminal(tiny: Any, pool: Any) -> None:
    lm, tok = tiny
    env = gym.wrappers.TimeLimit(ToyTextEnv(turns=9), max_episode_steps=2)
    rollout = collect_rollouts([env], HFGenerator(lm, tok, 1.0), ChatFormat(tok), jobs(1),
                               Limits(10, 4, 1024), pool)
    traj = rollout.trajectories[0]
    assert traj.cut == "env_truncated" and not traj.terminated and len(traj.turns) == 2


def test_environments_step_at_once_and_overlap_generation(tiny: Any, pool: Any) -> None:
    lm, tok = tiny
    # Different delays put the episodes out of step, so some generate while others step.
    envs = [ActionLog(delay=0.1 + 0.15 * i, turns=3) for i in range(4)]
    gen = SpyGenerator(lm, tok, 1.0)
    rollout = collect_rollouts(envs, gen, ChatFormat(tok), jobs(6), Limits(5, 4, 1024), pool)
    assert [t.job.index for t in rollout.trajectories] == list(range(6))
    assert sorted(len(e.actions) for e in envs) != [0, 0, 0, 18]  # the work was spread
    steps = [w for e in envs for w in e.windows]
    assert rollout.env_seconds >= sum(e - s for s, e in steps)
    concurrent = [(a, b) for a in steps for b in steps if a < b and overlap(a, b)]
    assert concurrent, "no two environment steps ever ran at the same time"
    assert any(overlap(g, s) for g in gen.windows for s in steps), \
        "generation never ran while an environment was stepping"


def test_generator_respects_budgets_and_stops_at_eos(tiny: Any) -> None:
    lm, tok = tiny
    gen = HFGenerator(lm, tok, temperature=1.0)
    torch.manual_seed(0)
    prompts = [[104, 105], [104, 105, 106, 107, 108]] * 20
    budgets = [3, 7] * 20
    outs = gen.generate(prompts, budgets)
    for out, budget in zip(outs, budgets, strict=True):
        assert 1 <= len(out) <= budget
        assert all(t not in gen.stop_ids for t in out[:-1])
    assert any(out[-1] in gen.stop_ids for out in outs) or all(
        len(o) == b for o, b in zip(outs, budgets, strict=True))


def test_chat_format_frames_tools_and_observations() -> None:
    from transformers import ByT5Tokenizer

    tok = ByT5Tokenizer()
    from repogym.agents.ppo.policy import ensure_chat_template

    ensure_chat_template(tok)
    chat = ChatFormat(tok, system_prompt="Be brief.")
    prompt = str(tok.decode(chat.prompt_ids("Fix the bug.", TOOLS)))
    assert '"name": "say"' in prompt and "Fix the bug." in prompt and "Be brief." in prompt
    assert prompt.endswith("<|assistant|>")
    after_eos = tok.decode(chat.observation_ids("ok", tok.eos_token_id))
    assert after_eos == "<|tool|>ok</s><|assistant|>"
    cut_mid_turn = tok.decode(chat.observation_ids("ok", ord("x") + 3))
    assert cut_mid_turn == "</s><|tool|>ok</s><|assistant|>"


def test_chat_format_falls_back_to_a_user_turn_when_tool_role_is_rejected() -> None:
    from transformers import ByT5Tokenizer

    tok = ByT5Tokenizer()
    tok.chat_template = (
        "{% for m in messages %}{% if m['role'] not in ['user', 'assistant'] %}"
        "{{ raise_exception('roles must alternate') }}{% endif %}"
        "[{{ m['role'] }}]{{ m['content'] }}</s>{% endfor %}"
        "{% if add_generation_prompt %}[assistant]{% endif %}"
    )
    chat = ChatFormat(tok)
    assert chat.observation_role == "user"
    assert tok.decode(chat.observation_ids("ok", tok.eos_token_id)) == "[user]ok</s>[assistant]"


def test_sampling_ignores_the_checkpoints_warping_defaults_and_keeps_them() -> None:
    lm, tok = tiny_model(seed=0)
    lm.generation_config.top_k = 5  # e.g. a chat checkpoint's shipped defaults
    lm.generation_config.repetition_penalty = 1.5
    torch.manual_seed(0)
    outs = HFGenerator(lm, tok, 1.0).generate([[104, 105, 106]] * 2000, [1] * 2000)
    # Near-uniform tiny model: pure sampling sees most of the 384 ids, top-k would see 5.
    assert len({o[0] for o in outs}) > 200
    assert lm.generation_config.top_k == 5 and lm.generation_config.repetition_penalty == 1.5
