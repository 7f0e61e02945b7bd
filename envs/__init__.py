"""The Gymnasium environment, its tools, the sandbox and the grader."""
