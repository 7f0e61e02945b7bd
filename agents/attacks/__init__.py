"""The attacks the hacker plays (:mod:`repogym.agents.hacker`): :mod:`.kit` (what an attack is
made of), :mod:`.pytest_attacks` (Python tasks), :mod:`.runner_attacks` (the other languages'
runners), and ``payloads/`` (the code they plant, as files)."""
