/* The code of an in-process probe (issue 36): what the jump at a site runs, in the target, at every
 * hit. Assembled by `python -m sampler.inprocess.assemble` into templates.py (the bytes, checked in:
 * a host that runs sampler needs no assembler; tests/unit/test_inprocess_ring.py checks that they are
 * this file's). Each placeholder below is a number that occurs once in the bytes, replaced when the
 * probe is placed; the displaced instructions and the jump back follow the template's bytes.
 *
 * The data area (ring.py says the same in Python): the probe's counters at DATA + PROBE (hits, then
 * drops), the producers' ticket at DATA + 0x40, the ring of records at DATA + 0x1000, 2^16 slots of
 * 32 bytes. A record: its sequence word (the slot's ticket + 1 once written), the probe's number, the
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
 */
        .intel_syntax noprefix
        .set DATA, 0x1122334455667788   /* the data area's address in the target */
        .set HITS, 0x0badc0de           /* the probe's hit counter, from DATA */
        .set DROPS, 0x0dd5c0de          /* the probe's count of records dropped (the ring full) */
        .set PROBE, 0x5eed1d00          /* the probe's number, in its records */
        .set HEAD, 0x40
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

        .text
        .globl  entry, entry_end, anywhere, anywhere_end
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
