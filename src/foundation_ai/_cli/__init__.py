"""The pieces of the ``foundation-ai`` command line (entry point: :mod:`foundation_ai.cli`).

- ``model_choice``: ``--model`` / ``--base-url`` to a backend, with one-line errors.
- ``builtin_tools``: the opt-in ``files`` and ``shell`` tools.
- ``render``: rich output (streamed text, thinking, tool panels, usage line, transcripts).
"""
