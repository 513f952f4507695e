"""The bench and fault harnesses' short forms (`make test-bench`, run by .ci/run after `make test`):
each runs a bench script end to end and checks its files and columns, never a speed. The
fixtures are the integration tests' own."""

from tests.integration.conftest import built_targets, go_target, start_target  # noqa: F401
