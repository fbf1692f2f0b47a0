"""What the web console (issue 32) reads and does, for routes/console.py: reads under the caller's row-level security
(queries.py), state changes through the tools' own handlers with an audit row each (actions.py, audit.py)."""
