/* The code of an in-process probe (issue 36): what the jump at a site runs, in the target, at every
 * hit. Assembled by `python -m sampler.inprocess.assemble` into templates.py (the bytes, checked in:
 * a host that runs sampler needs no assembler; tests/unit/test_inprocess_ring.py checks that they are
 * this file's). Each placeholder below is a number that occurs once in the bytes, replaced when the
 * probe is placed; the displaced instructions and the jump back follow the template's bytes.
 *
 * The data area (ring.py says the same in Python): the probe's counters at DATA + PROBE (hits, then
 * drops), the producers' ticket at DATA + 0x40, a byte at DATA + 0x48 that, non-zero, has the
 * probes only count (sampler sets it while --max-overhead's budget rests), the ring of records at
 * DATA + 0x1000, 2^16 slots of 32 bytes. A record: its sequence word (the slot's ticket + 1 once written), the probe's number, the
 * thread's fs base (rdfsbase; `mov rdx, fs:0` where the kernel does not allow it), the TSC.
 *
 * The ring is Vyukov's bounded queue with many producers (the target's threads) and one consumer
 * (sampler): a producer takes ticket t when slot t's sequence word says t (free for this lap),
 * with a compare-and-swap of the ticket; when the word is behind (the slot holds a record sampler
 * has not read: the ring is full) the record is dropped and counted; when it is ahead another thread
 * took t first: it tries the next. Nothing waits, nothing calls, no system call is made.
 *
 * "entry": at a function's first instruction, where the arithmetic flags are the callee's to clobber
 * (the System V ABI and Go's keep only the direction flag, untouched here) and nothing lives below
 * the stack pointer (the caller's red zone ended with its call): 40 bytes pushed.
 * "anywhere": past the 128-byte red zone a leaf function may use, the flags kept too: 176 bytes.
 *
 * "reads_entry" and "reads_anywhere": a probe that also reads (--expr): its own data area (reads.py
 * lays it out: hits at +0x80, drops at +0x88, its ticket at +0x40, its ring at +0x1000 with slots of
 * SLOT bytes), the same queue. Into its record go the thread's general registers (at 32, in
 * sampler.debuginfo.locations.REGISTERS' order, rsp as it was at the site), then each read of the
 * read plan's table (at TABLE, 48 bytes an entry, kind 0 ending it): its address, the system call's
 * result and the bytes; last, at 12, the probe's own time from its first TSC read to its last (ticks,
 * at most 2^32 - 1: what the budget counts). The byte at +0x48 is the counting probes' own. A read
 * is a process_vm_readv of the process's own memory, which returns EFAULT where a plain load would fault: no pointer the target holds can make the probe crash it.
 * The stack holds the same 40 bytes as the counting probe (the registers go into the record, whose
 * slot is the probe's own until its sequence word is written).
 *
 * "filter_entry" and "filter_anywhere" (issue 39): a probe that lets only some calls through to an int3, which
 * sampler arms at its stop (a nop, then a jump back to the displaced instructions, in a private page of its
 * own: /proc/PID/mem writes it as any int3, the guardian puts the nop back, a forked child's copy is cleaned): a Python
 * probe's place in the eval loop, which every Python call of the process passes, stops only the calls of its
 * function. The test is a chain of reads from one of the site's registers (its table at FTABLE, 8-byte words:
 * the register's place among the 16 pushed, in sampler.debuginfo.locations.REGISTERS' order, times 8; the
 * number of reads; each read's offset, added to the value before it reads 8 bytes there; the value the last
 * read must give): for a frame in a register, one read (the frame's code object). The reads are
 * process_vm_readv, as a reading probe's: a frame pointer the DWARF got wrong costs a miss, never a fault.
 * Counted at DATA + PROBE: every call tested (hits), and every test whose read failed (drops: let go, no
 * stop, counted in the summary). Nothing is written but the counters; the stack holds 128 bytes of the
 * registers and 40 of the read's vectors, past the red zone where the site is not an entry.
 */
        .intel_syntax noprefix
        .set DATA, 0x1122334455667788   /* the data area's address in the target */
        .set HITS, 0x0badc0de           /* the probe's hit counter, from DATA */
        .set DROPS, 0x0dd5c0de          /* the probe's count of records dropped (the ring full) */
        .set PROBE, 0x5eed1d00          /* the probe's number, in its records */
        .set HEAD, 0x40
        .set OFF, 0x48                  /* non-zero: the probe only counts (--max-overhead's rest) */
        .set RING, 0x1000
        .set MASK, 0xffff

.macro RECORD
        push    rax
        push    rcx
        push    rdx
        push    rsi
        push    rdi
        movabs  rdi, DATA
        lock inc qword ptr [rdi + HITS]
        cmp     byte ptr [rdi + OFF], 0
        jne     4f
        mov     rax, qword ptr [rdi + HEAD]
1:      mov     rsi, rax
        and     esi, MASK
        shl     rsi, 5
        lea     rsi, [rdi + rsi + RING]
        mov     rcx, qword ptr [rsi]
        cmp     rcx, rax
        jne     3f
        lea     rdx, [rax + 1]
        lock cmpxchg qword ptr [rdi + HEAD], rdx   /* rax: the ticket seen; on failure, the ticket now */
        jne     1b
        mov     rcx, rax
        rdfsbase rdx                               /* (or `mov rdx, fs:0`, 9 bytes as these two) */
        .byte   0x0f, 0x1f, 0x40, 0x00             /* nop dword ptr [rax + 0] */
        mov     qword ptr [rsi + 16], rdx
        mov     dword ptr [rsi + 8], PROBE
        rdtsc
        shl     rdx, 32
        or      rax, rdx
        mov     qword ptr [rsi + 24], rax
        lea     rcx, [rcx + 1]
        mov     qword ptr [rsi], rcx               /* written: x86 keeps stores in order */
        jmp     4f
3:      sub     rcx, rax
        js      2f                                 /* behind: the ring is full */
        mov     rax, qword ptr [rdi + HEAD]
        jmp     1b
2:      lock inc qword ptr [rdi + DROPS]
4:      pop     rdi
        pop     rsi
        pop     rdx
        pop     rcx
        pop     rax
.endm

        .set RDATA, 0x2233445566778899  /* a reading probe's own data area */
        .set SLOTMASK, 0x5107a5c0       /* its slots - 1 */
        .set SLOT, 0x51075eed           /* bytes of a slot */
        .set TABLE, 0x3344556677889900  /* its read plan's table */
        .set PID, 0x0b1d0b1d            /* the process's id, in its own pid namespace */
        .set R_HITS, 0x80
        .set R_DROPS, 0x88
        .set R_TICKET, 160
        .set R_LOCAL, 168
        .set R_REMOTE, 184
        .set NOT_MADE, -1000            /* its pointer's read failed: this read was not made */
        .set EFAULT_, -14

/* RSP_AT_SITE: what the pushes below moved rsp by since the site (40, and more where the caller pushed) */
.macro READS RSP_AT_SITE
        push    rax
        push    rcx
        push    rdx
        push    rsi
        push    rdi
        movabs  rdi, RDATA
        lock inc qword ptr [rdi + R_HITS]
        cmp     byte ptr [rdi + OFF], 0
        jne     4f
        mov     rax, qword ptr [rdi + HEAD]
1:      mov     rsi, rax
        and     esi, SLOTMASK
        imul    rsi, rsi, SLOT
        lea     rsi, [rdi + rsi + RING]
        mov     rcx, qword ptr [rsi]
        cmp     rcx, rax
        jne     3f
        lea     rdx, [rax + 1]
        lock cmpxchg qword ptr [rdi + HEAD], rdx
        jne     1b
        mov     qword ptr [rsi + R_TICKET], rax
        mov     rax, qword ptr [rsp + 32]
        mov     qword ptr [rsi + 32], rax          /* rax */
        mov     rax, qword ptr [rsp + 16]
        mov     qword ptr [rsi + 40], rax          /* rdx */
        mov     rax, qword ptr [rsp + 24]
        mov     qword ptr [rsi + 48], rax          /* rcx */
        mov     qword ptr [rsi + 56], rbx
        mov     rax, qword ptr [rsp + 8]
        mov     qword ptr [rsi + 64], rax          /* rsi */
        mov     rax, qword ptr [rsp]
        mov     qword ptr [rsi + 72], rax          /* rdi */
        mov     qword ptr [rsi + 80], rbp
        lea     rax, [rsp + \RSP_AT_SITE]
        mov     qword ptr [rsi + 88], rax          /* rsp */
        mov     qword ptr [rsi + 96], r8
        mov     qword ptr [rsi + 104], r9
        mov     qword ptr [rsi + 112], r10
        mov     qword ptr [rsi + 120], r11
        mov     qword ptr [rsi + 128], r12
        mov     qword ptr [rsi + 136], r13
        mov     qword ptr [rsi + 144], r14
        mov     qword ptr [rsi + 152], r15
        rdfsbase rdx
        .byte   0x0f, 0x1f, 0x40, 0x00
        mov     qword ptr [rsi + 16], rdx
        mov     dword ptr [rsi + 8], PROBE
        rdtsc
        shl     rdx, 32
        or      rax, rdx
        mov     qword ptr [rsi + 24], rax
        mov     r12, rsi
        movabs  rbx, TABLE
5:      mov     rax, qword ptr [rbx]               /* kind: 1 a register, 2 a word read before, 3 fixed */
        test    rax, rax
        jz      9f
        mov     rcx, qword ptr [rbx + 8]           /* where the base is in the record */
        mov     edx, dword ptr [rbx + 28]
        lea     r13, [r12 + rdx]                   /* this read's place in the record */
        cmp     rax, 2
        jb      6f
        ja      7f
        mov     r8, qword ptr [rbx + 32]           /* the pointer's read: whole? */
        mov     r9, qword ptr [r12 + r8]
        cmp     r9, qword ptr [rbx + 40]
        jne     8f
6:      mov     rax, qword ptr [r12 + rcx]
        jmp     10f
7:      xor     eax, eax
10:     add     rax, qword ptr [rbx + 16]
        mov     qword ptr [r13], rax
        test    rax, rax
        jle     11f                                /* 0, or past 2^63: no read */
        mov     ecx, dword ptr [rbx + 24]
        lea     rdx, [r13 + 16]
        mov     qword ptr [r12 + R_LOCAL], rdx
        mov     qword ptr [r12 + R_LOCAL + 8], rcx
        mov     qword ptr [r12 + R_REMOTE], rax
        mov     qword ptr [r12 + R_REMOTE + 8], rcx
        mov     eax, 310                           /* process_vm_readv */
        mov     edi, PID
        lea     rsi, [r12 + R_LOCAL]
        mov     edx, 1
        lea     r10, [r12 + R_REMOTE]
        mov     r8d, 1
        xor     r9d, r9d
        syscall
        mov     qword ptr [r13 + 8], rax
        jmp     12f
11:     mov     qword ptr [r13 + 8], EFAULT_
        jmp     12f
8:      mov     qword ptr [r13], 0
        mov     qword ptr [r13 + 8], NOT_MADE
12:     add     rbx, 48
        jmp     5b
9:      mov     rsi, r12
        rdtsc
        shl     rdx, 32
        or      rax, rdx
        sub     rax, qword ptr [rsi + 24]
        mov     edx, 0xffffffff
        cmp     rax, rdx
        cmova   rax, rdx
        mov     dword ptr [rsi + 12], eax          /* the probe's own time so far, in TSC ticks */
        mov     rbx, qword ptr [rsi + 56]
        mov     rbp, qword ptr [rsi + 80]
        mov     r8, qword ptr [rsi + 96]
        mov     r9, qword ptr [rsi + 104]
        mov     r10, qword ptr [rsi + 112]
        mov     r11, qword ptr [rsi + 120]
        mov     r12, qword ptr [rsi + 128]
        mov     r13, qword ptr [rsi + 136]
        mov     r14, qword ptr [rsi + 144]
        mov     r15, qword ptr [rsi + 152]
        mov     rcx, qword ptr [rsi + R_TICKET]
        lea     rcx, [rcx + 1]
        mov     qword ptr [rsi], rcx               /* written */
        jmp     4f
3:      sub     rcx, rax
        js      2f
        mov     rax, qword ptr [rdi + HEAD]
        jmp     1b
2:      lock inc qword ptr [rdi + R_DROPS]
4:      pop     rdi
        pop     rsi
        pop     rdx
        pop     rcx
        pop     rax
.endm


        .set FTABLE, 0x4455667788990011 /* a filtering probe's chain of reads */
        .set STOP, 0x7ab57ab5           /* rel32 to its stop (a byte sampler arms, then a jump back) */

.macro PUSH_ALL
        push    r15
        push    r14
        push    r13
        push    r12
        push    r11
        push    r10
        push    r9
        push    r8
        push    rsp                                /* its slot: rsp as it was at the site, below */
        push    rbp
        push    rdi
        push    rsi
        push    rbx
        push    rcx
        push    rdx
        push    rax
.endm

.macro POP_ALL
        pop     rax
        pop     rdx
        pop     rcx
        pop     rbx
        pop     rsi
        pop     rdi
        pop     rbp
        lea     rsp, [rsp + 8]
        pop     r8
        pop     r9
        pop     r10
        pop     r11
        pop     r12
        pop     r13
        pop     r14
        pop     r15
.endm

/* RSP_AT_SITE: what rsp moved by, from the site to the first push (0 at an entry; 136 elsewhere) */
.macro FILTER RSP_AT_SITE, OUT
        PUSH_ALL
        lea     rax, [rsp + 128 + \RSP_AT_SITE]
        mov     qword ptr [rsp + 56], rax          /* rsp at the site */
        movabs  r13, DATA
        lock inc qword ptr [r13 + HITS]
        movabs  rbx, FTABLE
        mov     rax, qword ptr [rbx]
        mov     rax, qword ptr [rsp + rax]         /* the register */
        mov     r12, qword ptr [rbx + 8]           /* reads */
        lea     rbx, [rbx + 16]
        sub     rsp, 40                            /* local iovec, remote iovec, the word read */
1:      test    r12, r12
        jz      2f
        add     rax, qword ptr [rbx]
        lea     rcx, [rsp + 32]
        mov     qword ptr [rsp], rcx
        mov     qword ptr [rsp + 8], 8
        mov     qword ptr [rsp + 16], rax
        mov     qword ptr [rsp + 24], 8
        mov     eax, 310                           /* process_vm_readv */
        mov     edi, PID
        mov     rsi, rsp
        mov     edx, 1
        lea     r10, [rsp + 16]
        mov     r8d, 1
        xor     r9d, r9d
        syscall
        cmp     rax, 8
        jne     3f
        mov     rax, qword ptr [rsp + 32]
        lea     rbx, [rbx + 8]
        dec     r12
        jmp     1b
3:      lock inc qword ptr [r13 + DROPS]
        jmp     4f
2:      cmp     rax, qword ptr [rbx]
        je      5f
4:      lea     rsp, [rsp + 40]                    /* not this function's call: on, past the int3's byte */
        POP_ALL
        \OUT
        jmp     6f
5:      lea     rsp, [rsp + 40]
        POP_ALL
        \OUT
        .byte   0xe9                               /* jmp to its stop: sampler's int3, then back to 6 */
        .long   STOP
6:
.endm

        .text
        .globl  entry, entry_end, anywhere, anywhere_end, reads_entry, reads_entry_end, reads_anywhere
        .globl  reads_anywhere_end, filter_entry, filter_entry_end, filter_anywhere, filter_anywhere_end
entry:
        RECORD
entry_end:

anywhere:
        lea     rsp, [rsp - 128]
        pushfq
        RECORD
        popfq
        lea     rsp, [rsp + 128]
anywhere_end:

reads_entry:
        READS 40
reads_entry_end:

reads_anywhere:
        lea     rsp, [rsp - 128]
        pushfq
        READS 176
        popfq
        lea     rsp, [rsp + 128]
reads_anywhere_end:

.macro NOTHING
.endm

.macro OUT_ANYWHERE
        popfq
        lea     rsp, [rsp + 128]
.endm

filter_entry:
        FILTER 0, NOTHING
filter_entry_end:

filter_anywhere:
        lea     rsp, [rsp - 128]
        pushfq
        FILTER 136, OUT_ANYWHERE
filter_anywhere_end:

/* "sigtrap" and "restorer" (issue 59): the target's own SIGTRAP handler while sampler's int3s are in, so
 * that a trap the tracer can no longer take (the tracing worker SIGKILLed: the kernel lets a thread stopped at
 * an int3, or one that runs it next, go with its SIGTRAP) turns itself back into the instruction the int3
 * covers, and the target runs on. TRAPS (its only placeholder) is a table in the same pages: the count of
 * entries at +0, the handler the program had at +8 (0: SIG_DFL, 1: SIG_IGN), a kernel sigaction of SIG_DFL
 * at +32 (32 bytes of zero), and from +128 the entries, 16 bytes each: an int3's address, and where a copy
 * of the instruction it covers runs (outofline.py: COPY bytes at most, then on to what follows it).
 * Sampler writes an entry, then the count, before the int3 goes in; it never takes one away.
 *
 * A trap of the CPU's own int3 (si_code SI_KERNEL) is sampler's when the pc is just past an entry's int3
 * (the trap as the CPU made it), at it (sampler had set the thread back onto it), or inside a copy (sampler
 * had moved the thread there; the copy runs on): the pc goes to the copy, or stays. A single-step's trap
 * (TRAP_TRACE, or TRAP_BRKPT where a step ended in a system call) comes only from a step sampler began
 * (no debugger is left to take it): the trap flag goes. Anything else goes to the program's handler; where
 * it had none, it is raised again with the default action, as the program would have had it; where it
 * ignored SIGTRAP, it is ignored.
 * rdi, rsi, rdx: the signal, its siginfo, the ucontext (gregs at +40: rip +0xa8, eflags +0xb0). */
        .set TRAPS, 0x7ab1e5a5e1f0a1b2
        .set COPY, 48
sigtrap:
        movabs  r9, TRAPS
        cmp     dword ptr [rsi + 8], 0x80       /* si_code SI_KERNEL: an int3's trap */
        jne     5f
        mov     r8, [rdx + 0xa8]
        mov     rcx, [r9]
        lea     r10, [r9 + 128]
1:      test    rcx, rcx
        jz      6f
        mov     rax, r8
        sub     rax, [r10 + 8]
        cmp     rax, COPY
        jb      4f                              /* inside the copy: it runs on */
        mov     rax, [r10]
        cmp     r8, rax
        je      3f                              /* at the int3: its copy instead */
        inc     rax
        cmp     r8, rax
        je      3f                              /* just past it: its copy */
        add     r10, 16
        dec     rcx
        jmp     1b
3:      mov     rax, [r10 + 8]
        mov     [rdx + 0xa8], rax
4:      and     qword ptr [rdx + 0xb0], ~0x100  /* no trap flag of a step sampler began */
        ret
5:      mov     eax, [rsi + 8]
        cmp     eax, 1                          /* TRAP_BRKPT */
        je      4b
        cmp     eax, 2                          /* TRAP_TRACE */
        je      4b
6:      mov     rax, [r9 + 8]
        test    rax, rax
        jz      7f
        cmp     rax, 1
        jne     8f
        ret                                     /* SIG_IGN: ignored, as it was */
8:      jmp     rax                             /* the program's own handler, as the kernel would call it */
7:      mov     eax, 13                         /* rt_sigaction(SIGTRAP, SIG_DFL, NULL, 8) */
        mov     edi, 5
        lea     rsi, [r9 + 32]
        xor     edx, edx
        mov     r10d, 8
        syscall
        mov     eax, 39                         /* getpid */
        syscall
        push    rax
        mov     eax, 186                        /* gettid */
        syscall
        mov     esi, eax
        pop     rdi
        mov     edx, 5
        mov     eax, 234                        /* tgkill(pid, tid, SIGTRAP): delivered once the handler returns */
        syscall
        ret
sigtrap_end:

restorer:
        mov     eax, 15                         /* rt_sigreturn */
        syscall
restorer_end:
