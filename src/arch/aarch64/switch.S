/*
 * aarch64 (AAPCS64) context switch (see arch/arch.h).
 *
 * A suspended context is its stack pointer; the 176-byte frame holds, from
 * sp up:
 *
 *   sp+0   x19 x20   sp+16 x21 x22   sp+32 x23 x24   sp+48 x25 x26
 *   sp+64  x27 x28   sp+80 x29 x30 (frame pointer, return address)
 *   sp+96  d8 d9     sp+112 d10 d11  sp+128 d12 d13  sp+144 d14 d15
 *   sp+160 FPCR      sp+168 pad
 *
 * These are the callee-saved registers of AAPCS64 (only the low 64 bits of
 * v8-v15 are callee-saved) plus the FP control register. FPCR is written
 * only when it differs: on some cores an FPCR write is context-
 * synchronising and costs far more than the read and compare.
 * usched__ctx_make (ctx.c) lays out the same frame with x30 pointing at
 * usched__ctx_trampoline.
 */

        .text

/* void usched__ctx_switch(usched__ctx_t *from, usched__ctx_t *to) */
        .globl  usched__ctx_switch
        .hidden usched__ctx_switch
        .type   usched__ctx_switch, %function
        .p2align 4
usched__ctx_switch:
        .cfi_startproc
        sub     sp, sp, #176
        .cfi_def_cfa_offset 176
        stp     x19, x20, [sp, #0]
        stp     x21, x22, [sp, #16]
        stp     x23, x24, [sp, #32]
        stp     x25, x26, [sp, #48]
        stp     x27, x28, [sp, #64]
        stp     x29, x30, [sp, #80]
        .cfi_offset x19, -176
        .cfi_offset x20, -168
        .cfi_offset x21, -160
        .cfi_offset x22, -152
        .cfi_offset x23, -144
        .cfi_offset x24, -136
        .cfi_offset x25, -128
        .cfi_offset x26, -120
        .cfi_offset x27, -112
        .cfi_offset x28, -104
        .cfi_offset x29, -96
        .cfi_offset x30, -88
        stp     d8, d9, [sp, #96]
        stp     d10, d11, [sp, #112]
        stp     d12, d13, [sp, #128]
        stp     d14, d15, [sp, #144]
        .cfi_offset d8, -80
        .cfi_offset d9, -72
        .cfi_offset d10, -64
        .cfi_offset d11, -56
        .cfi_offset d12, -48
        .cfi_offset d13, -40
        .cfi_offset d14, -32
        .cfi_offset d15, -24
        mrs     x10, fpcr
        str     x10, [sp, #160]

        mov     x9, sp
        str     x9, [x0]                /* from->sp = sp */
        ldr     x9, [x1]
        mov     sp, x9                  /* sp = to->sp: same frame shape */

        ldr     x9, [sp, #160]
        cmp     x9, x10
        b.eq    1f
        msr     fpcr, x9
1:
        ldp     d8, d9, [sp, #96]
        ldp     d10, d11, [sp, #112]
        ldp     d12, d13, [sp, #128]
        ldp     d14, d15, [sp, #144]
        ldp     x19, x20, [sp, #0]
        ldp     x21, x22, [sp, #16]
        ldp     x23, x24, [sp, #32]
        ldp     x25, x26, [sp, #48]
        ldp     x27, x28, [sp, #64]
        ldp     x29, x30, [sp, #80]
        add     sp, sp, #176
        .cfi_def_cfa_offset 0
        .cfi_restore x19
        .cfi_restore x20
        .cfi_restore x21
        .cfi_restore x22
        .cfi_restore x23
        .cfi_restore x24
        .cfi_restore x25
        .cfi_restore x26
        .cfi_restore x27
        .cfi_restore x28
        .cfi_restore x29
        .cfi_restore x30
        .cfi_restore d8
        .cfi_restore d9
        .cfi_restore d10
        .cfi_restore d11
        .cfi_restore d12
        .cfi_restore d13
        .cfi_restore d14
        .cfi_restore d15
        ret
        .cfi_endproc
        .size   usched__ctx_switch, .-usched__ctx_switch

/*
 * First code of a new context: the initial frame put entry in x19, arg in
 * x20, 0 in x29 and left sp 16-byte aligned. x30 is marked undefined so
 * unwinders stop here. entry must not return: if it does, brk traps
 * (SIGTRAP) instead of running off the stack.
 */
        .globl  usched__ctx_trampoline
        .hidden usched__ctx_trampoline
        .type   usched__ctx_trampoline, %function
        .p2align 4
usched__ctx_trampoline:
        .cfi_startproc
        .cfi_undefined x30
        mov     x0, x20
        blr     x19
        brk     #0x1
        .cfi_endproc
        .size   usched__ctx_trampoline, .-usched__ctx_trampoline

        .section .note.GNU-stack, "", %progbits
