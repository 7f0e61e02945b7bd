"""``repogym bench``: the environment's own speed and cost, measured next to the plain
alternatives (``run`` holds the sections and their goals). It stands above the packages it
measures and is used by nothing but the command line and its tests."""
