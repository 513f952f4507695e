"""The instruction under an every-hit breakpoint, run without a single-step (process/emulate.py), on
made-up registers and memory: each result as the CPU leaves it (by the Intel manual; the integration
test_emulate.py compares each with the CPU's own step), and what must be stepped refused."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sampler.process.emulate import AF, CF, OF, PF, SF, ZF, Access, emulation_for

AT = 0x401000
STACK = 0x7FFF_0000_1000 + 0x800  # mid-page: a push stays in the stack pointer's page


class Memory(Access):
    """Bytes by address; every page readable and writable but those ``refused``."""

    def __init__(self, refused: tuple[int, ...] = ()) -> None:
        self.bytes: dict[int, int] = {}
        self.refused = refused

    def read(self, address: int, size: int) -> bytes | None:
        if any(address <= r < address + size for r in self.refused):
            return None
        return bytes(self.bytes.get(address + i, 0) for i in range(size))

    def write(self, address: int, data: bytes) -> bool:
        if any(address <= r < address + len(data) for r in self.refused):
            return False
        self.bytes.update({address + i: b for i, b in enumerate(data)})
        return True


def registers(**given: int) -> SimpleNamespace:
    names = ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15")
    return SimpleNamespace(**{**dict.fromkeys(names, 0), "rsp": STACK, "rip": AT + 1, "eflags": 0x202, **given})


def run(code: str, regs: SimpleNamespace, memory: Memory | None = None, go: bool = False) -> bool:
    emulation = emulation_for(bytes.fromhex(code), AT, go)
    assert emulation is not None, code
    return emulation(regs, memory or Memory())


def test_a_push_writes_the_register_below_the_stack_pointer_in_its_page() -> None:
    regs, memory = registers(rbp=0x1122334455667788), Memory()
    assert run("55", regs, memory)  # push rbp
    assert regs.rsp == STACK - 8 and regs.rip == AT + 1
    assert memory.read(STACK - 8, 8) == (0x1122334455667788).to_bytes(8, "little")
    # a push into the page below (a stack overflow's guard page, maybe) is the CPU's to fault: stepped
    low = registers(rsp=0x7FFF_0000_1000)
    assert not run("55", low) and low.rsp == 0x7FFF_0000_1000 and low.rip == AT + 1  # nothing changed


def test_moves_zero_extend_32_bit_results_and_keep_the_rest_of_an_8_bit_one() -> None:
    regs = registers(rax=0xFFFF_FFFF_FFFF_FFFF, rbx=0x1234)
    assert run("4889e5", regs) and regs.rbp == STACK and regs.rip == AT + 3  # mov rbp, rsp
    assert run("89d8", regs) and regs.rax == 0x1234  # mov eax, ebx: the upper half cleared
    regs.rax = 0xAAAA_AAAA_AAAA_AAAA
    assert run("b001", regs) and regs.rax == 0xAAAA_AAAA_AAAA_AA01  # mov al, 1
    assert run("488d05f0ffffff", regs) and regs.rax == AT + 7 - 0x10  # lea rax, [rip-0x10]: from the next one
    memory = Memory()
    assert run("48890424", registers(rax=7), memory)  # mov [rsp], rax: the thread's own frame
    assert memory.read(STACK, 8) == (7).to_bytes(8, "little")


def test_arithmetic_sets_the_six_flags_as_the_cpu_does() -> None:
    regs = registers(rax=5)
    assert run("4883e805", regs) and regs.rax == 0  # sub rax, 5
    assert regs.eflags & (ZF | PF | CF | SF | OF) == ZF | PF and regs.eflags & 0x200  # IF kept
    regs = registers(rax=0x7FFF_FFFF)
    assert run("83c001", regs) and regs.rax == 0x8000_0000  # add eax, 1: signed overflow
    assert regs.eflags & (OF | SF | AF | CF | ZF) == OF | SF | AF
    regs = registers(rax=0x1234)
    assert run("31c0", regs) and regs.rax == 0 and regs.eflags & (ZF | PF | CF | OF) == ZF | PF  # xor eax, eax
    regs = registers(rsp=STACK)
    assert run("4883fc00", regs) and regs.rsp == STACK and not regs.eflags & (ZF | CF)  # cmp rsp, 0: flags only


def test_a_return_pops_a_canonical_address_and_refuses_one_the_cpu_would_fault_on() -> None:
    memory = Memory()
    memory.write(STACK, (0x401234).to_bytes(8, "little"))
    regs = registers()
    assert run("c3", regs, memory) and regs.rip == 0x401234 and regs.rsp == STACK + 8
    memory.write(STACK, (0x8000_0000_0000_0000).to_bytes(8, "little"))
    regs = registers()
    assert not run("c3", regs, memory) and regs.rsp == STACK  # #GP at the ret itself: stepped


def test_gos_stack_check_reads_the_guard_through_r14_and_unreadable_memory_is_stepped() -> None:
    g = 0xC000_0001_0000
    memory = Memory()
    memory.write(g + 16, (STACK - 0x100).to_bytes(8, "little"))
    regs = registers(r14=g)
    assert run("493b6610", regs, memory, go=True)  # cmp rsp, [r14+16]
    assert not regs.eflags & CF  # rsp above the guard: no growth
    assert emulation_for(bytes.fromhex("493b6610"), AT, go=False) is None  # not Go: a load it does not know
    assert not run("493b6610", registers(r14=g), Memory(refused=(g + 16,)), go=True)


@pytest.mark.parametrize("code, what", [
    ("f0480fc101", "lock xadd [rcx], rax"),
    ("0f05", "syscall"),
    ("e800000000", "call"),
    ("66b80100", "mov ax, 1: a 16-bit form"),
    ("c5f877", "vzeroupper: a vector register"),
])
def test_what_is_not_exact_and_safe_is_stepped(code: str, what: str) -> None:
    assert emulation_for(bytes.fromhex(code), AT, False) is None, what
