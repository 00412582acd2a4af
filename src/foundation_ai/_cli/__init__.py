"""The pieces of the ``foundation-ai`` command line (entry point: :mod:`foundation_ai.cli`).

Imports go one way (no cycles; ``tests/test_cli_imports.py`` checks it):
``cli`` -> ``commands`` / ``setup_commands`` -> ``chat`` -> ``turns`` / ``render`` / ``report``
-> ``status`` / ``safe_text``.

- ``parser``: the argument parser; a bare prompt runs it (``foundation-ai "Hi"``).
- ``commands``: ``run``, ``chat``, ``sessions``, ``show``; building the session from the options.
- ``setup_commands``: ``models`` and ``keys``.
- ``serve_cmd``: ``serve`` (agents over an OpenAI-compatible HTTP API, ``docs/serve.md``).
- ``config``: ``config.toml`` defaults and the ``keys.json`` key file (mode 0600).
- ``prompt_input``: piped stdin, ``-a`` attachments, ``--schema``.
- ``run_output``: how ``run`` shows the answer (streamed, Markdown, plain, JSON lines).
- ``chat``: the interactive loop (slash commands, steering, Ctrl-C).
- ``turns``: running a turn in a worker thread while the main thread handles input, Ctrl-C and
  tool questions.
- ``approval``: the shell tool's y/N question, showing the whole command.
- ``safe_text``: control characters from the model, tools and servers made visible.
- ``model_choice``: ``--model`` / ``--base-url`` to a backend, with one-line errors.
- the opt-in ``files`` and ``shell`` tools live in ``agentic/toolsets/builtin.py`` (the server uses them too).
- ``render``: rich output (streamed text, thinking, tool panels, usage line, transcripts).
- ``report``: the failure and usage lines after a turn.
- ``status``: exit statuses and the one-line error format.
- ``session_index``: listing stored sessions and resolving id prefixes.
"""
