"""The pieces of the ``foundation-ai`` command line (entry point and parser:
:mod:`foundation_ai.cli`).

- ``commands``: ``run``, ``chat``, ``sessions``, ``show``; building the session from the options.
- ``chat``: the interactive loop (slash commands, steering, Ctrl-C).
- ``turns``: running a turn in a worker thread while the main thread handles input, Ctrl-C and
  tool questions.
- ``model_choice``: ``--model`` / ``--base-url`` to a backend, with one-line errors.
- ``builtin_tools``: the opt-in ``files`` and ``shell`` tools.
- ``render``: rich output (streamed text, thinking, tool panels, usage line, transcripts).
- ``session_index``: listing stored sessions and resolving id prefixes.
"""
