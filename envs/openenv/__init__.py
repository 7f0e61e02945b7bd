"""repogym over OpenEnv's protocol: the server behind ``repogym serve``, its message types and a
typed client. Needs ``openenv-core`` (the ``serve`` extra)."""
