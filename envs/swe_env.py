"""``repogym/SWE-v0``: one episode is one task in a repository inside a container."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym

from repogym import settings
from repogym.envs import fork, pooling
from repogym.envs.actions import HOW_TO_CALL, parse_action
from repogym.envs.backends import BackendSettings, open_backend
from repogym.envs.curriculum import Curriculum, EpisodeResult, Sampler, check, parse
from repogym.envs.curriculum import failures as failure_starts_
from repogym.envs.curriculum.draws import draw
from repogym.envs.curriculum.sharing import open_store
from repogym.envs.grading.flags import Flag
from repogym.envs.grading.grader import GraderConfig, GradingReport
from repogym.envs.grading.rewards import RewardFn, components, reward_fn, task_similarity
from repogym.envs.record import EpisodeRecorder, versions
from repogym.envs.spaces import AnyText
from repogym.envs.tools import TOOL_SCHEMAS, Toolbox
from repogym.errors import ActionError, SandboxError
from repogym.images.recipe import BuiltImage
from repogym.sandbox.base import Sandbox
from repogym.schema import Task
from repogym.suite import ALL, load_suite_splits, pick, select

MAX_TEXT = 1_000_000  # characters; longer observations are cut


class SWEEnv(gym.Env[str, Any]):
    """A coding agent resolves an issue in a real repository; hidden tests give the reward.

    ## Description
    Each episode is one task: a repository at its base commit inside a fresh Docker container
    and an issue to resolve. The agent calls tools (a persistent bash shell, a file viewer and
    editor) and submits; the grader then applies the agent's diff to a pristine container,
    adds the task's hidden tests and runs them where the agent cannot reach.

    ## Action Space
    ``AnyText``: one tool call, as a dict (``{"tool": "bash", "command": "ls"}`` or
    ``{"name": ..., "arguments": {...}}``), a JSON string of one, or raw model text holding one
    ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` block. Tools: ``bash``,
    ``view``, ``create``, ``str_replace``, ``insert``, ``undo_edit``, ``submit``; their
    OpenAI function schemas are in ``info["tools"]`` after ``reset``; ``bash`` takes an optional
    ``timeout`` in seconds, capped by ``bash_timeout``. A malformed call never
    raises: the observation says what was wrong and how to call the tool, it counts as a step,
    and ``info["action_error"]`` holds the message.

    ## Observation Space
    ``AnyText`` (any ``str``). After ``reset``: the task prompt (the issue, where the repository
    is, how to call the tools); ``info`` holds the task's id, split, kind, repository, problem
    statement, image and the tools' schemas. After a step: the tool's output (head and tail when
    long). A bash command that fails ends its observation with ``[exit code N]`` (the model
    reads only the observation); programs read ``info["exit_code"]`` (bash steps only),
    ``info["timed_out"]`` and ``info["output"]``, the command's output without those notes,
    and never parse it.

    ## Rewards
    0.0 on every step but the last. On ``submit`` the reward comes from ``reward``:
    ``"binary"`` (default: 1.0 when resolved), ``"pass_rate"``, ``"shaped"``,
    ``"replication"`` (agreement with the reference and the tests), ``"dense"``, or a
    callable over ``info["reward_components"]``. ``info["grading"]`` holds the per-test
    report (and, for tasks with differential cases, ``differential``: agreement per function)
    and ``info["flags"]`` every tampering attempt detected.

    ``"dense"`` is for any task with gold cases (``repogym tasks enrich``: inputs traced from
    the tests on the gold code, kept where the gold and the base code differ, the
    discriminating ones, or agree, the regression ones)::

        dense = 0.5 agreement + 0.5 f2p_pass_rate - 0.3 (1 - p2p_pass_rate)
                - 0.2 (1 - regression_agreement) - 0.2 [any tampering]

    clipped to [-1, 1]; an invalid run gets the tampering term alone. ``agreement`` is the
    share of discriminating inputs on which the candidate does what the gold code does
    (on a replication task: the reference's agreement), ``regression_agreement`` the same
    share over the regression inputs; without cases they fall back to ``f2p_pass_rate`` and
    1. The gold patch earns 1.0, the empty patch 0.0.

    ## Starting State
    A container from the task's image with the repository at ``/testbed`` as one commit (no
    later history), network off, an unprivileged user, limits on memory, CPU and processes.

    ## Curricula
    ``sampler`` chooses the task of a reset that names none: ``"uniform"`` (the default),
    ``"band:0.1-0.9"`` (recent success rate in a band), ``"difficulty:20"`` (easy to hard),
    ``"weights:FILE.json"`` or a dict of weights, or a
    :class:`~repogym.envs.curriculum.sampler.Sampler` (see :mod:`repogym.envs.curriculum`).
    Every episode that ends updates the task's statistics (``env.unwrapped.task_stats``),
    shared by the envs of a process, an async vector env's workers and a Ray vector env's
    workers, and kept in the ``stats`` file when one is given. With ``failure_starts=K``,
    ``reset(options={"start": "failure"})`` (or ``failure=P`` in the sampler) starts from a
    snapshot taken K turns before the end of an earlier failed episode of the task
    (``info["start"]``, ``info["failure"]``, ``info["prefix_turns"]``).

    ## Episode End
    Terminated after ``submit``. Truncated when ``max_steps`` steps, ``max_seconds`` of wall
    time or ``max_observation_chars`` characters of observations are used up
    (``info["truncation"]`` says which); a truncated episode is not graded.

    ## Snapshots
    ``env.unwrapped.snapshot()`` returns a :class:`~repogym.envs.fork.Snapshot` of the episode
    in progress (files, the shell's folder and exported variables, steps and budgets used, the
    file tools' undo history, the record so far); ``reset(options={"snapshot": handle})``
    starts an episode from it, here or in another env, and returns its last observation
    (``info["snapshot"]``, ``info["steps"]``). Taking one or branching costs about a verified
    in-place reset. Running processes are not carried over. Each branch is graded on its own.

    ## Arguments
    - ``suite``: a built-in suite name (``"demo"``, ``"adversarial"``), a ``.jsonl`` file or a
      suite folder. ``tasks``: a list of :class:`~repogym.schema.Task` instead.
    - ``split``: ``"train"``, ``"eval"``, ``"adversarial"`` or ``"all"``. Default: ``"train"``
      for a suite (held-out tasks never reach training unless asked for; a suite without train
      tasks raises an error that names the splits it has), every task for ``tasks=``.
    - ``reward``: see Rewards. ``max_steps`` (50), ``max_seconds`` (1800),
      ``max_observation_chars`` (1,000,000), ``bash_timeout`` (60 s per command),
      ``output_limit`` (16,000 bytes kept per command).
    - ``record_dir``: write one JSON Lines record per episode there.
    - ``snapshot_dir``: where :meth:`snapshot` keeps its files (default: a temporary folder of
      this process, removed when it exits).
    - ``pool_size``: ``None`` (default) shares one pool with every env of this process that
      has the same settings: it keeps one started container ready per image in use, so every
      reset after the first is served warm (a few ms instead of a container start), and a
      vector env of N envs holds N containers plus one spare per image. An int gives this env
      a pool of its own with that many ready containers per image (0: a container starts
      when none is ready). Cost of the default: one idle container per image in use (about
      2 MiB inside it and 14 MiB of containerd-shim on the host, as ``repogym bench``
      measures), plus the warm grading container below.
    - ``reuse_containers`` (True): reset a used container in place, in the background, and
      reuse it once the reset is verified (otherwise it is removed).
    - ``warm_grader`` (True): start the grading container while the agent works (one per
      image, shared like the pool).
    - ``grader``: a :class:`~repogym.envs.grading.grader.GraderConfig`.
    - ``sampler``, ``stats`` (a JSON file of task statistics, read if it exists, written
      after every episode), ``failure_starts`` (K, 0: off): see Curricula.
    - ``sandbox``: the backend (:mod:`repogym.envs.backends`); None (default) is
      ``REPOGYM_BACKEND``, itself ``"docker"`` unless set. ``"podman"``: the same containers on
      rootless Podman's Docker-compatible socket. ``"fake"``: no Docker at all, the repository
      in a local folder with a local bash, graded by running its tests in another local folder
      with this host's Python. For tests of the code above the sandbox: it isolates nothing,
      and its grading defends against nothing. docs/backends.md compares them.

    ## Version History
    - v0: first version.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        suite: str | Path | None = "demo",
        tasks: list[Task] | None = None,
        split: str | None = None,
        reward: str | RewardFn = "binary",
        max_steps: int = 50,
        max_seconds: float = 1800.0,
        max_observation_chars: int = 1_000_000,
        bash_timeout: float = 60.0,
        output_limit: int = 16_000,
        record_dir: str | Path | None = None,
        snapshot_dir: str | Path | None = None,
        pool_size: int | None = None,
        reuse_containers: bool = True,
        warm_grader: bool = True,
        grader: GraderConfig | None = None,
        sandbox: str | None = None,
        render_mode: str | None = None,
        run_id: str | None = None,
        model: str | None = None,
        sampler: str | Sampler | dict[str, float] | Curriculum | None = None,
        stats: str | Path | None = None,
        failure_starts: int = 0,
    ):
        if tasks is None and suite is None:
            raise ValueError("pass suite=NAME|PATH or tasks=[Task, ...]")
        if max_steps < 1 or max_seconds <= 0 or max_observation_chars < 1:
            raise ValueError(
                f"budgets must be positive: max_steps={max_steps}, max_seconds={max_seconds}, "
                f"max_observation_chars={max_observation_chars}"
            )
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode={render_mode!r}: use None or 'ansi'")
        sandbox = sandbox or settings.BACKEND.get()
        if failure_starts < 0 or (failure_starts and sandbox not in ("docker", "podman")):
            raise ValueError(f"failure_starts={failure_starts}: give turns >= 0; failure starts "
                             "are snapshots, which need a container engine: sandbox='docker' "
                             f"or 'podman' (not {sandbox!r})")
        # held-out tasks stay out of training unless asked for: a suite gives its train split
        self.split = split or (ALL if tasks is not None else "train")
        self.tasks, self._elsewhere = (
            _select_given(list(tasks), self.split) if tasks is not None
            else load_suite_splits(suite or "demo", self.split))
        self._where = "the tasks given" if tasks is not None else f"suite {str(suite)!r}"
        self.curriculum = parse(sampler)
        check(self.curriculum, self.tasks)
        self.reward_fn = reward_fn(reward)
        self.max_steps, self.max_seconds = max_steps, max_seconds
        self.max_observation_chars = max_observation_chars
        self.bash_timeout, self.output_limit = bash_timeout, output_limit
        self.record_dir = record_dir
        self.snapshot_dir = Path(snapshot_dir) if snapshot_dir is not None else None
        self.render_mode = render_mode
        self.sandbox_kind = sandbox
        self.run_id = run_id or pooling.run_id()
        self.model = model
        backend = open_backend(sandbox, BackendSettings(
            self.run_id, output_limit, pool_size, reuse_containers, warm_grader, grader))
        self.images, self.sandboxes, self.grader = (backend.images, backend.sandboxes,
                                                    backend.grader)
        self.task_stats = open_store(stats, pooling.serve)
        self.failure_starts = failure_starts
        self._failures = failure_starts_.FailureTracker(self.task_stats, failure_starts)
        self._failure_dir: Path | None = None  # the store's folder for failure snapshots
        self.observation_space = AnyText(max_length=MAX_TEXT)
        self.action_space = AnyText(max_length=MAX_TEXT)
        # the episode in progress; reset() sets them, close() lets go of them
        self.task: Task | None = None
        self.image: BuiltImage | None = None
        self.sandbox: Sandbox | None = None
        self.toolbox: Toolbox | None = None
        self.recorder: EpisodeRecorder | None = None
        self._episodes = 0  # episodes started by this env (names the records)
        self._steps = 0
        self._obs_chars = 0  # characters of observations returned this episode
        self._start = 0.0  # time.monotonic() when the episode started (less a branch's time)
        self._done = True
        self._last_obs = ""
        self._branched_from: str | None = None  # the snapshot this episode started from
        self._report: GradingReport | None = None  # the last submission's grading

    @property
    def pool(self) -> pooling.Pool | None:
        """The Docker backend's pool of containers (None for other backends)."""
        return getattr(self.sandboxes, "pool", None)

    # --- reset ---------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        rng_seed = int(self.np_random.integers(2**31))
        snap = fork.as_snapshot(options["snapshot"]) if options.get("snapshot") else None
        start = options.get("start")
        if snap is None and options.get("task_id") is not None:  # one of another split: say so
            pick(self.tasks, options["task_id"], random.Random(0), self._elsewhere, self._where,
                 self.split)
        if snap is not None:
            task, failed = fork.task_of(snap, self.tasks), None
            if start == "failure":
                failed = {"snapshot": snap.to_dict()}
        else:
            drawn = draw(self.tasks, self.curriculum, self.task_stats, random.Random(rng_seed),
                         options.get("task_id"), start)
            task, failed = drawn.task, drawn.failure
            if failed is not None:
                snap = fork.as_snapshot(failed["snapshot"])
        image = self.images.ensure(task)
        # the used container goes back to the pool in the same call that takes the next one:
        # the pool resets it in place while this episode runs
        previous = self.sandbox
        self.sandbox = None
        self._release()
        self.task, self.image = task, image
        self.sandbox = self.sandboxes.acquire(self.image, previous)
        self.grader.warm(self.image.tag)
        self.toolbox = Toolbox(self.sandbox, bash_timeout=self.bash_timeout)
        self._episodes += 1
        self._steps, self._obs_chars, self._start = 0, 0, time.monotonic()
        obs = prompt = self._prompt(self.task)
        if snap is not None:
            obs = self._branch(snap)
        self._branched_from = snap.id if snap is not None else None
        turns, parent = failure_starts_.prefix(snap.folder) if failed and snap else ([], None)
        if parent is not None:  # the prefix's turns are the policy's context
            obs = failure_starts_.transcript(prompt, turns)
        self._failures.begin(turns)
        self._done = False
        info: dict[str, Any] = {
            "task_id": self.task.instance_id,
            "problem_statement": self.task.problem_statement,
            "split": self.task.split,
            "kind": self.task.kind,
            "repo": self.task.repo,
            "tools": TOOL_SCHEMAS,
            "image": self.image.tag,
        }
        if snap is not None:
            info.update(snapshot=snap.id, steps=snap.steps)
        info["start"] = "failure" if parent is not None else "snapshot" if snap else "task"
        if parent is not None:
            info.update(failure=parent, prefix_turns=turns, prompt=prompt)
        elif start == "failure":
            info["start_note"] = (f"no failed episode of {task.instance_id} is kept here yet: "
                                  "it started from the task's start")
        if self.record_dir is not None:
            # the pid too: a vector env's workers share their parent's run id
            self.recorder = EpisodeRecorder(self.record_dir, self.task.instance_id, self._episodes,
                                            f"{self.run_id}-{os.getpid()}-{id(self):x}")
            self.recorder.write("reset", task_id=self.task.instance_id,
                                task_hash=self.task.task_hash, seed=seed, observation=obs,
                                image=self.image.tag, model=self.model,
                                fork=snap and {"snapshot": snap.id, "step": snap.steps,
                                               "parent_record": snap.parent_record,
                                               "parent_snapshot": snap.parent},
                                start=info["start"], failure=parent)
            if snap is not None:
                self.recorder.copy(fork.prefix_events(snap))
            info["record"] = str(self.recorder.path)
        self._last_obs = obs
        return obs, info

    def _branch(self, snap: fork.Snapshot) -> str:
        """Restores a snapshot into the fresh container; returns its last observation."""
        assert self.sandbox is not None and self.image is not None and self.toolbox is not None
        try:
            fork.restore(self.sandbox, snap, self.image.tag)
        except BaseException:
            box, self.sandbox, self.toolbox = self.sandbox, None, None
            self._give_back(box)  # reset in place again, or removed
            raise
        self.toolbox.editor.load_history(snap.history)
        self._steps, self._obs_chars = snap.steps, snap.observation_chars
        self._start = time.monotonic() - snap.seconds
        return snap.last_observation

    def snapshot(self) -> fork.Snapshot:
        """A handle to this episode's state now; ``reset(options={"snapshot": handle})`` starts
        an episode from it (see :mod:`repogym.envs.fork`). Costs about a verified in-place
        reset; running processes are not part of it."""
        if self._done or self.sandbox is None or self.task is None or self.image is None:
            raise fork.SnapshotError("snapshot() needs an episode in progress: call it after "
                                     "reset() and before the step that ends the episode")
        return self._take(self.snapshot_dir or fork.default_dir())

    def _take(self, folder: Path) -> fork.Snapshot:
        assert self.toolbox is not None and self.task is not None and self.image is not None
        assert self.sandbox is not None
        counters = {"steps": self._steps, "observation_chars": self._obs_chars,
                    "seconds": time.monotonic() - self._start, "last_observation": self._last_obs,
                    "history": self.toolbox.editor.history_state()}
        record = self.recorder.path if self.recorder is not None else None
        return fork.take(self.sandbox, self.task, self.image.tag, counters, folder, record,
                         self._branched_from)

    def _prompt(self, task: Task) -> str:
        where = self.sandbox.workdir if self.sandbox is not None else ""
        return (
            f"{task.problem_statement.strip()}\n\n"
            f"---\nThe repository {task.repo} is checked out at {where}, the working folder of "
            "your shell. Change the code so that the issue above is resolved. Hidden tests "
            "check your change after you submit; they are not in the repository, and changes "
            "to test files are discarded.\n"
            f"{HOW_TO_CALL}\nCall `submit` when you are done."  # it names the tools
        )

    # --- step ----------------------------------------------------------------------------------

    def step(self, action: Any) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._done or self.toolbox is None:
            over = {"action_error": "the episode is over: call reset() first"}
            return "The episode is over: call reset() to start a new one.", 0.0, True, False, over
        started = time.monotonic()
        self._steps += 1
        info: dict[str, Any] = {"step": self._steps, "action_error": None}
        parsed: dict[str, Any] | None = None
        try:
            call = parse_action(action)
            parsed = {"name": call.name, "arguments": call.arguments}
            result = self.toolbox.call(call)
            obs, info["action_error"] = result.output, result.error
            info.update(tool=call.name, timed_out=result.timed_out, output=result.command_output)
            if result.exit_code is not None:  # bash only: a None among ints breaks vector envs
                info["exit_code"] = result.exit_code
            submitted = result.submitted and result.error is None
        except ActionError as exc:
            obs, info["action_error"], submitted = str(exc), str(exc), False
        reward, terminated = 0.0, False
        if submitted:
            reward, obs = self._submit(info)
            terminated = True
        self._obs_chars += len(obs)
        truncated = False
        if not terminated:
            reason = self._budget_left()
            if reason:
                truncated, info["truncation"] = True, reason
                obs += f"\n[episode truncated: {reason}]"
        self._done = terminated or truncated
        obs = obs if len(obs) <= MAX_TEXT else obs[: MAX_TEXT - 40] + "\n[observation cut]"
        # timings go to the record, not to info: info must be reproducible for a seed
        self._record_step(action, parsed, obs, reward, terminated, truncated, info,
                          time.monotonic() - started)
        self._last_obs = obs
        self._curriculum_step(action, obs, reward, terminated, truncated, info)
        return obs, reward, terminated, truncated, info

    def _curriculum_step(self, action: Any, obs: str, reward: float, terminated: bool,
                         truncated: bool, info: dict[str, Any]) -> None:
        """The task's statistics at the end of an episode; snapshots for failure starts."""
        assert self.task is not None
        folder = self._failure_dir
        if folder is None and self.failure_starts:
            folder = self._failure_dir = Path(self.task_stats.failure_dir())
        self._failures.stepped(action, obs, None if self._done or folder is None
                               else lambda: self._take(folder))
        if not self._done:
            return
        resolved = bool(info.get("resolved"))
        self.task_stats.record(EpisodeResult(self.task.instance_id, terminated, resolved,
                                             reward, self._steps, time.time()))
        record = str(self.recorder.path) if self.recorder is not None else None
        self._failures.ended(self.task.instance_id, self._steps, terminated and not resolved,
                             {"parent_record": record, "parent_reward": reward})

    def _budget_left(self) -> str | None:
        if self._steps >= self.max_steps:
            return f"max_steps={self.max_steps} reached"
        if time.monotonic() - self._start >= self.max_seconds:
            return f"max_seconds={self.max_seconds} reached"
        if self._obs_chars >= self.max_observation_chars:
            return f"max_observation_chars={self.max_observation_chars} reached"
        return None

    def _submit(self, info: dict[str, Any]) -> tuple[float, str]:
        assert self.task is not None and self.image is not None and self.sandbox is not None
        flags: list[Flag] = []
        try:
            patch = self.sandbox.diff(self.image.repo_commit)
        except SandboxError as exc:
            patch, info["diff_error"] = "", str(exc)
            flags.append(Flag.DIFF_FAILED)
        report = self.grader.grade(self.task, patch, self.image.tag)
        report.flags = flags + report.flags
        comps = components(report, self._steps, self._similarity(report))
        reward = float(self.reward_fn(comps))
        info.update(grading=report.to_dict(), reward_components=comps, flags=report.flag_names(),
                    patch=patch, resolved=report.resolved)
        self._report = report
        verdict = "resolved" if report.resolved else "not resolved"
        return reward, f"Submitted. The task is {verdict}; reward {reward:.3f}."

    def _similarity(self, report: GradingReport) -> float | None:
        ref = self.task.reference if self.task else None
        if not ref or not ref.get("source") or not ref.get("file") or self.sandbox is None:
            return None
        assert self.task is not None
        try:
            text = self.sandbox.read_file(ref["file"]).decode("utf-8", errors="replace")
        except (OSError, SandboxError):
            return 0.0
        return task_similarity(self.task, text)

    def _record_step(self, action: Any, parsed: dict[str, Any] | None, obs: str, reward: float,
                     terminated: bool, truncated: bool, info: dict[str, Any],
                     seconds: float) -> None:
        if self.recorder is None:
            return
        raw = action if isinstance(action, str) else repr(action)
        self.recorder.write("step", step=self._steps, seconds=seconds, raw_action=raw[:1_000_000],
                            parsed=parsed,
                            observation=obs, reward=reward, terminated=terminated,
                            truncated=truncated, info={k: v for k, v in info.items()
                                                       # kept elsewhere in the record
                                                       if k not in ("grading", "patch", "output")})
        if terminated or truncated:
            self.recorder.write(
                "end", reward=reward, reward_components=info.get("reward_components"),
                grading=info.get("grading"), flags=info.get("flags"), patch=info.get("patch"),
                truncation=info.get("truncation"), n_steps=self._steps,
                versions=versions({
                    **(self.images.provenance(self.image) if self.image else {}),
                    "task_hash": self.task.task_hash if self.task else None,
                    "model": self.model}, engine=False),
            )
            self.recorder.close()

    # --- the rest ------------------------------------------------------------------------------

    def render(self) -> str | None:
        return self._last_obs if self.render_mode == "ansi" else None

    def _release(self) -> None:
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None
        if self.sandbox is not None:
            self._give_back(self.sandbox)
            self.sandbox = None
        self.toolbox = None

    def _give_back(self, sandbox: Sandbox) -> None:
        self.sandboxes.release(sandbox)

    def close(self) -> None:
        self._failures.abandon()
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None
        if self.sandbox is not None:  # closing: no point resetting it for reuse
            box, self.sandbox = self.sandbox, None
            self.sandboxes.discard(box)
        self.toolbox = None
        self.sandboxes.close()
        self._done = True


def _select_given(tasks: list[Task], split: str) -> tuple[list[Task], dict[str, str]]:
    """The given tasks of ``split``, and the split of each one left out (see ``pick``)."""
    chosen = select(tasks, split, where="the tasks given")
    kept = {t.instance_id for t in chosen}
    return chosen, {t.instance_id: t.split for t in tasks if t.instance_id not in kept}
