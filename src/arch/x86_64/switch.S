/*
 * x86-64 System V context switch (see arch/arch.h).
 *
 * A suspended context is its stack pointer; the stack holds, from sp up:
 *
 *   sp+0   MXCSR (4 bytes), x87 control word (2 bytes), 2 bytes pad
 *   sp+8   r15   sp+16 r14   sp+24 r13   sp+32 r12   sp+40 rbx   sp+48 rbp
 *   sp+56  return address
 *
 * These are exactly the registers and control words the ABI makes
 * callee-saved; everything else is dead across the call to
 * usched__ctx_switch, so the compiler has spilled whatever it needs. The
 * MXCSR status flags travel with the control bits (they are per context).
 * Each is loaded only when it differs from the one switched away from:
 * ldmxcsr and fldcw are microcoded and cost more than the whole compare
 * (aarch64's FPCR write is skipped the same way).
 * usched__ctx_make (ctx.c) lays out the same frame with the return address
 * pointing at usched__ctx_trampoline.
 */

#if defined(__CET__) && (__CET__ & 1)
#define ENDBR endbr64
#else
#define ENDBR
#endif

        .text

/* void usched__ctx_switch(usched__ctx_t *from, usched__ctx_t *to) */
        .globl  usched__ctx_switch
        .hidden usched__ctx_switch
        .type   usched__ctx_switch, @function
        .p2align 4
usched__ctx_switch:
        .cfi_startproc
        ENDBR
        pushq   %rbp
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset %rbp, 0
        pushq   %rbx
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset %rbx, 0
        pushq   %r12
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset %r12, 0
        pushq   %r13
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset %r13, 0
        pushq   %r14
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset %r14, 0
        pushq   %r15
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset %r15, 0
        subq    $8, %rsp
        .cfi_adjust_cfa_offset 8
        stmxcsr (%rsp)
        fnstcw  4(%rsp)
        movl    (%rsp), %eax            /* this context's control words, */
        movzwl  4(%rsp), %edx           /* to compare with the next one's */

        movq    %rsp, (%rdi)            /* from->sp = sp */
        movq    (%rsi), %rsp            /* sp = to->sp: same frame shape */
        .cfi_remember_state

        cmpl    (%rsp), %eax
        jne     1f
2:      cmpw    4(%rsp), %dx
        jne     3f
4:      addq    $8, %rsp
        .cfi_adjust_cfa_offset -8
        popq    %r15
        .cfi_adjust_cfa_offset -8
        .cfi_restore %r15
        popq    %r14
        .cfi_adjust_cfa_offset -8
        .cfi_restore %r14
        popq    %r13
        .cfi_adjust_cfa_offset -8
        .cfi_restore %r13
        popq    %r12
        .cfi_adjust_cfa_offset -8
        .cfi_restore %r12
        popq    %rbx
        .cfi_adjust_cfa_offset -8
        .cfi_restore %rbx
        popq    %rbp
        .cfi_adjust_cfa_offset -8
        .cfi_restore %rbp
        ret

        /* Out of line: a context whose control words differ (rare). */
        .cfi_restore_state
1:      ldmxcsr (%rsp)
        jmp     2b
3:      fldcw   4(%rsp)
        jmp     4b
        .cfi_endproc
        .size   usched__ctx_switch, .-usched__ctx_switch

/*
 * First code of a new context. The initial frame put entry in r12 and arg in
 * r13 and left rsp 16-byte aligned here, so the call below enters entry with
 * rsp+8 aligned as the ABI requires. rbp is 0 and the return address is
 * marked undefined, so frame-pointer and DWARF unwinders stop here. entry
 * must not return: if it does, ud2 traps (SIGILL) instead of running off
 * the stack.
 */
        .globl  usched__ctx_trampoline
        .hidden usched__ctx_trampoline
        .type   usched__ctx_trampoline, @function
        .p2align 4
usched__ctx_trampoline:
        .cfi_startproc
        .cfi_undefined %rip
        ENDBR
        movq    %r13, %rdi
        callq   *%r12
        ud2
        .cfi_endproc
        .size   usched__ctx_trampoline, .-usched__ctx_trampoline

        .section .note.GNU-stack, "", @progbits
