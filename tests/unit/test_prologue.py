"""Where a function's breakpoint is reached once per call (prologue.py), on code as
compilers emit it."""

from __future__ import annotations

from sampler.debuginfo.prologue import past_stack_check, reached_once

START = 0x401000
GO_SMALL = bytes.fromhex("493b6610" "7620" "55" "4889e5" "4883ec10")
"""cmp rsp, [r14+0x10]; jbe morestack; push rbp; mov rbp, rsp; sub rsp, 0x10 (Go 1.17+)"""
GO_LARGE = bytes.fromhex("4c8da424f8feffff" "4d3b6610" "0f86a0000000" "55" "4889e5")
"""lea r12, [rsp-0x108]; cmp r12, [r14+0x10]; jbe morestack; push rbp; mov rbp, rsp"""
GO_HUGE = bytes.fromhex("4989e4" "4981ec00100000" "7220" "4d3b6610" "7610" "55")
"""mov r12, rsp; sub r12, 0x1000; jb morestack; cmp r12, [r14+0x10]; jbe morestack; push rbp"""
GLIBC_WRITE = bytes.fromhex("f30f1efa" "648b042518000000" "85c0" "7510" "b801000000" "0f05")
"""endbr64; mov eax, fs:[0x18]; test eax, eax; jne (threads); mov eax, 1; syscall"""
C_O0 = bytes.fromhex("f30f1efa" "55" "4889e5" "897dfc" "8b45fc" "83c001")
"""endbr64; push rbp; mov rbp, rsp; mov [rbp-4], edi; mov eax, [rbp-4]; add eax, 1"""
LEAF = bytes.fromhex("4883ec08" "48892c24" "488d2c24" "488b08")
"""a Go leaf: sub rsp, 8; mov [rsp], rbp; lea rbp, [rsp]; mov rcx, [rax] (no stack check)"""


def test_a_go_function_breaks_right_after_its_stack_check() -> None:
    assert past_stack_check(GO_SMALL, START) == START + 6
    assert past_stack_check(GO_LARGE, START) == START + 18
    assert past_stack_check(GO_HUGE, START) == START + 18


def test_code_without_a_stack_check_has_none() -> None:
    assert past_stack_check(LEAF, START) is None
    assert past_stack_check(GLIBC_WRITE, START) is None
    assert past_stack_check(C_O0, START) is None


def test_a_place_past_a_branch_is_not_reached_by_every_call() -> None:
    # glibc's wrappers: the place after the thread test is on one side of a branch
    assert not reached_once(GLIBC_WRITE, START, START + 18)
    assert reached_once(GLIBC_WRITE, START, START + 14)  # before the branch: every call
    assert reached_once(GLIBC_WRITE, START, START)


def test_a_straight_prologue_and_go_stack_check_are_reached_once() -> None:
    assert reached_once(C_O0, START, START + 8)  # after push rbp; mov rbp, rsp
    assert reached_once(GO_SMALL, START, START + 10, go=True)  # past the stack check and push rbp
    assert reached_once(GO_HUGE, START, START + 18, go=True)


def test_the_stack_check_exception_is_for_go_only() -> None:
    assert not reached_once(GO_SMALL, START, START + 10, go=False)


LOOP_BACK = bytes.fromhex("55" "4889e5" "8b07" "83c704" "85c0" "75f7" "c3")
"""push rbp; mov rbp, rsp; [+4] mov eax, [rdi]; add edi, 4; test eax, eax; jne +4; ret"""


def test_a_place_a_loop_jumps_back_to_is_not_reached_once() -> None:
    assert not reached_once(LOOP_BACK, START, START + 4)  # the loop's back edge comes to it
    assert reached_once(LOOP_BACK, START, START + 1)  # before it: once


def test_a_place_inside_an_instruction_or_beyond_the_code_is_refused() -> None:
    assert not reached_once(C_O0, START, START + 6)  # the middle of mov rbp, rsp
    assert not reached_once(C_O0, START, START + 100)
