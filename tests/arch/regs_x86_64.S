/*
 * Test helper: void regs_switch(usched__ctx_t *from, usched__ctx_t *to,
 *                               const uint64_t in[6], uint64_t out[6])
 * Loads in[] into rbx rbp r12 r13 r14 r15, switches, and on return stores
 * those registers into out[] (so the caller can check that they survived
 * whatever the other context did to them). Preserves its caller's registers.
 */
        .text
        .globl  regs_switch
        .type   regs_switch, @function
regs_switch:
        .cfi_startproc
        pushq   %rbp
        .cfi_adjust_cfa_offset 8
        pushq   %rbx
        .cfi_adjust_cfa_offset 8
        pushq   %r12
        .cfi_adjust_cfa_offset 8
        pushq   %r13
        .cfi_adjust_cfa_offset 8
        pushq   %r14
        .cfi_adjust_cfa_offset 8
        pushq   %r15
        .cfi_adjust_cfa_offset 8
        pushq   %rcx                    /* out */
        .cfi_adjust_cfa_offset 8
        movq    0(%rdx), %rbx
        movq    8(%rdx), %rbp
        movq    16(%rdx), %r12
        movq    24(%rdx), %r13
        movq    32(%rdx), %r14
        movq    40(%rdx), %r15
        call    usched__ctx_switch
        popq    %rcx
        .cfi_adjust_cfa_offset -8
        movq    %rbx, 0(%rcx)
        movq    %rbp, 8(%rcx)
        movq    %r12, 16(%rcx)
        movq    %r13, 24(%rcx)
        movq    %r14, 32(%rcx)
        movq    %r15, 40(%rcx)
        popq    %r15
        .cfi_adjust_cfa_offset -8
        popq    %r14
        .cfi_adjust_cfa_offset -8
        popq    %r13
        .cfi_adjust_cfa_offset -8
        popq    %r12
        .cfi_adjust_cfa_offset -8
        popq    %rbx
        .cfi_adjust_cfa_offset -8
        popq    %rbp
        .cfi_adjust_cfa_offset -8
        ret
        .cfi_endproc
        .size   regs_switch, .-regs_switch

        .section .note.GNU-stack, "", @progbits
