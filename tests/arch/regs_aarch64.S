/*
 * Test helper: void regs_switch(usched__ctx_t *from, usched__ctx_t *to,
 *                               const uint64_t in[20], uint64_t out[20])
 * Loads in[0..9] into x19-x28, in[10] into x29 and in[11..18] into d8-d15
 * (x30 is the return address, so it cannot carry a pattern), switches, and
 * on return stores those registers into out[]. Preserves its caller's
 * registers.
 */
        .text
        .globl  regs_switch
        .type   regs_switch, %function
regs_switch:
        .cfi_startproc
        sub     sp, sp, #176
        .cfi_def_cfa_offset 176
        stp     x19, x20, [sp, #0]
        stp     x21, x22, [sp, #16]
        stp     x23, x24, [sp, #32]
        stp     x25, x26, [sp, #48]
        stp     x27, x28, [sp, #64]
        stp     x29, x30, [sp, #80]
        .cfi_offset x29, -96
        .cfi_offset x30, -88
        stp     d8, d9, [sp, #96]
        stp     d10, d11, [sp, #112]
        stp     d12, d13, [sp, #128]
        stp     d14, d15, [sp, #144]
        str     x3, [sp, #160]          /* out */
        ldp     x19, x20, [x2, #0]
        ldp     x21, x22, [x2, #16]
        ldp     x23, x24, [x2, #32]
        ldp     x25, x26, [x2, #48]
        ldp     x27, x28, [x2, #64]
        ldr     x29, [x2, #80]
        ldp     d8, d9, [x2, #88]
        ldp     d10, d11, [x2, #104]
        ldp     d12, d13, [x2, #120]
        ldp     d14, d15, [x2, #136]
        bl      usched__ctx_switch
        ldr     x3, [sp, #160]
        stp     x19, x20, [x3, #0]
        stp     x21, x22, [x3, #16]
        stp     x23, x24, [x3, #32]
        stp     x25, x26, [x3, #48]
        stp     x27, x28, [x3, #64]
        str     x29, [x3, #80]
        stp     d8, d9, [x3, #88]
        stp     d10, d11, [x3, #104]
        stp     d12, d13, [x3, #120]
        stp     d14, d15, [x3, #136]
        ldp     x19, x20, [sp, #0]
        ldp     x21, x22, [sp, #16]
        ldp     x23, x24, [sp, #32]
        ldp     x25, x26, [sp, #48]
        ldp     x27, x28, [sp, #64]
        ldp     x29, x30, [sp, #80]
        ldp     d8, d9, [sp, #96]
        ldp     d10, d11, [sp, #112]
        ldp     d12, d13, [sp, #128]
        ldp     d14, d15, [sp, #144]
        add     sp, sp, #176
        .cfi_def_cfa_offset 0
        ret
        .cfi_endproc
        .size   regs_switch, .-regs_switch

        .section .note.GNU-stack, "", %progbits
