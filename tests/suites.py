"""The suites make test leaves to make test-more (CI runs both): make test is the short form, under 10
minutes on a 2-core machine. Each suite is a pytest mark given here at collection (conftest.py), by file or
by test; `pytest -m SUITE` runs one, `-m "not more"` all the rest. A test moved here keeps its assertions:
it runs in CI every time, in its own make target."""

from __future__ import annotations

import re

INTEGRATION = "tests/integration/"

SUITES: dict[str, tuple[str, ...]] = {
    "hostile": (  # make test-hostile: targets no privilege wrote, against root
        f"{INTEGRATION}test_hostile.py", "tests/unit/test_python_hostile.py"),
    "fleet": (  # make test-fleet: many processes, forks
        f"{INTEGRATION}test_many.py", f"{INTEGRATION}test_forks.py"),
    "delve": (  # make test-delve: the Delve backends beside ptrace on Go values
        f"{INTEGRATION}test_delve_attach.py", f"{INTEGRATION}test_go_values.py", f"{INTEGRATION}test_httpd_go.py"),
    "ship": (  # make test-ship: the wheel alone in a fresh venv
        f"{INTEGRATION}test_wheel.py",),
    "beside": (  # make test-beside: Debian's programs nobody here wrote, and sampler beside gdb and bpftrace
        f"{INTEGRATION}test_emulate.py::test_debians_redis_is_counted_exactly_and_every_emulation_matches_the_cpu",
        f"{INTEGRATION}test_beside_bpftrace.py::",
        f"{INTEGRATION}test_probes.py::test_debians_libc_clones_and_inlined_copies_are_all_breakpoints",
        f"{INTEGRATION}test_debuginfo.py::test_malloc_in_debian_python_with_libc6_dbg",
        f"{INTEGRATION}test_debuginfo.py::test_debug_info_from_a_debuginfod_server",
        f"{INTEGRATION}test_stack.py::test_beside_gdb_on_",
        f"{INTEGRATION}test_services.py::test_nginx_logs_no_interrupted_system_call",
        f"{INTEGRATION}test_inprocess.py::test_debians_redis_commands_are_counted_in_process_as_redis_counts_them",
        f"{INTEGRATION}test_latency.py::test_debians_redis_process_command_latency_beside_its_own_commandstats",
        f"{INTEGRATION}test_strings.py::test_the_replies_a_debian_redis_writes_read_with_str_and_buf",
        f"{INTEGRATION}test_services.py::test_nginx_every_request_of_every_worker_is_traced_through_a_reload",
        f"{INTEGRATION}test_services.py::test_nginx_request_latency_one_row_per_request",
        f"{INTEGRATION}test_usdt_programs.py::test_postgres_query_texts_and_their_latency",
    ),
    "heavy": (  # make test-heavy: the long forms of tests make test runs short (more threads, millions of
        # calls a second, a rest under --max-overhead), and more cases of one (Python's other interpreters: make
        # test-python)
        f"{INTEGRATION}test_inprocess.py::test_an_expr_at_5_million_calls_a_second_is_counted_by_hist_in_bulk",
        f"{INTEGRATION}test_inprocess.py::test_max_overhead_rests_a_reading_probe_which_then_only_counts",
        f"{INTEGRATION}test_inprocess.py::test_every_call_is_counted_in_the_target_exactly_and_each_row_names_its_thread[8]",
        f"{INTEGRATION}test_inprocess.py::test_every_call_is_counted_in_the_target_exactly_and_each_row_names_its_thread[2]",
        f"{INTEGRATION}test_inprocess.py::test_a_go_program_survives_reading_probes_put_in_and_taken_out_again",
        f"{INTEGRATION}test_inprocess.py::test_every_libc_function_takes_a_probe_in_batches_and_the_target_comes_out",
        f"{INTEGRATION}test_inprocess.py::test_a_hot_function_of_8_threads_probed_and_unprobed_runs_on_unharmed[burst-go]",
        # libc's other wrappers of the same shape (make test: write and malloc on 1 thread or 8, read, openat)
        *(f"{INTEGRATION}test_every_call.py::test_trace_counts_every_call[{case}]" for case in (
            "write-libc:write-arg0-8", "malloc-libc:malloc-arg0-1", "send-libc:send-arg0-8",
            "recv-libc:recv-arg0-8", "close-libc:close-arg0-8", "free-libc:free-arg0-8")),
    ),
}
"""Each suite's tests: a node id's start (a file, or a test with or without its parameters)."""

DELVE_CASES = (f"{INTEGRATION}test_bad_input.py::", f"{INTEGRATION}test_report.py::",
               f"{INTEGRATION}test_strings.py::")
"""Files whose cases run on each backend: the Delve backends' cases go to make test-delve (ptrace's stay)."""
DELVE = re.compile(r"[-\[]delve(-rpc)?(-[^\]]*)?\]$")


def suite_of(nodeid: str) -> str | None:
    if nodeid.startswith(DELVE_CASES) and DELVE.search(nodeid):
        return "delve"
    return next((name for name, starts in SUITES.items() if nodeid.startswith(starts)), None)
