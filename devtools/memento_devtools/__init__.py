"""Developer tooling for Memento: `make run` (launcher) and the embedded Postgres/Valkey it and the tests use."""
