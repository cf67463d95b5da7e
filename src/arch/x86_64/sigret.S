/*
 * Signal return for a handler installed with the rt_sigaction system call
 * (core/preempt.c), which on x86-64 must name its own restorer. The same
 * bytes as the C library's (`mov $15, %rax; syscall`, rt_sigreturn), so
 * unwinders and debuggers recognise the signal frame; the nop before it
 * lets an unwinder that looks at the return address minus one find it too.
 */
        .text
        .globl  usched__sig_restorer
        .hidden usched__sig_restorer
        .type   usched__sig_restorer, @function
        .p2align 4
        nop
usched__sig_restorer:
        movq    $15, %rax
        syscall
        ud2
        .size   usched__sig_restorer, .-usched__sig_restorer

        .section .note.GNU-stack, "", @progbits
