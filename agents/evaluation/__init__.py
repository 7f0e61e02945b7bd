"""The evaluation harness: agents (or predictions) over a suite, in parallel episodes, with
per-episode records, a summary, a report and swebench's reports (``repogym eval``).

``runner`` runs the whole evaluation; ``episode`` one episode in a worker process;
``ray_runner`` the same workers on a Ray cluster; ``predictions`` grades patches made
elsewhere; ``summary`` and ``report`` write what came out; ``progress`` says how far it is.
"""
