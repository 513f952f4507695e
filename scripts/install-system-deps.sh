#!/usr/bin/env bash
# Install, from Debian's packages, whatever sampler needs that this machine lacks.
# Safe to run twice: it installs nothing when everything is there.
# With the argument "bench" it also installs perf.
set -euo pipefail
need=()
command -v go >/dev/null 2>&1 || need+=(golang-go)
command -v dlv >/dev/null 2>&1 || need+=(delve)
command -v make >/dev/null 2>&1 || need+=(make)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v g++ >/dev/null 2>&1 || need+=(g++)      # the C++ target
command -v rustc >/dev/null 2>&1 || need+=(rustc)  # the Rust target
command -v gdb >/dev/null 2>&1 || need+=(gdb)  # the other debugger of the fault suite
command -v tmux >/dev/null 2>&1 || need+=(tmux)  # the test of --live runs it in a real terminal
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v objcopy >/dev/null 2>&1 || need+=(binutils)  # the tests split debug files as packagers do
command -v ss >/dev/null 2>&1 || need+=(iproute2)  # the test that dlv listens only in its own network
# debug information from elsewhere: elfutils' debuginfod client (used by sampler when
# DEBUGINFOD_URLS is set), the debuginfod server (the tests run one on 127.0.0.1) and
# glibc's separate debug files (a real program's library, found by build-id)
ldconfig -p 2>/dev/null | grep -q 'libdebuginfod\.so\.1' || need+=(libdebuginfod1)
command -v debuginfod >/dev/null 2>&1 || need+=(debuginfod)
dpkg-query -W -f='${Status}' libc6-dbg 2>/dev/null | grep -q 'ok installed' || need+=(libc6-dbg)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
# a program nobody here wrote that forks (BGSAVE): the fork tests run Debian's redis-server
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
# a master and its workers, re-forked on HUP: the tests of a whole service run Debian's nginx
[ -x /usr/sbin/nginx ] || need+=(nginx)
# sampler stack beside the tools people compare it with: a Go daemon nobody here wrote (Debian strips
# it: only .gopclntab), Debian's own python3 (the interpreter, not pyenv's), elfutils' eu-stack
command -v prometheus-node-exporter >/dev/null 2>&1 || need+=(prometheus-node-exporter)
[ -x /usr/bin/python3.11 ] || need+=(python3.11)
# its debug file (the tests check sampler's table of 3.11's layout against its DWARF)
dpkg-query -W -f='${Status}' python3.11-dbg 2>/dev/null | grep -q 'ok installed' || need+=(python3.11-dbg)
command -v eu-stack >/dev/null 2>&1 || need+=(elfutils)
# the flame graph test opens sampler's SVG in a real headless browser
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# bpftrace beside sampler on the same process (a kernel uprobe where sampler would probe; the same
# calls read by both), and the eBPF reference of the benches
command -v bpftrace >/dev/null 2>&1 || need+=(bpftrace)
# USDT: <sys/sdt.h> for the bundled target's probes; Debian's PostgreSQL, whose 71 probes the tests read
[ -f /usr/include/x86_64-linux-gnu/sys/sdt.h ] || need+=(systemtap-sdt-dev)
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
if [ "${1:-}" = bench ]; then
  command -v perf >/dev/null 2>&1 || need+=(linux-perf)  # bench/profile.py's reference
fi
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-system-deps: missing ${need[*]}; run as root or install them: apt-get install ${need[*]}" >&2
  exit 1
fi
echo "install-system-deps: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
