/*
 * The preemption signal's handler (docs/preempt.md; the monitor's side is
 * in preempt.c). Built without sanitizer instrumentation (CMakeLists.txt):
 * it may interrupt any code of the worker, sanitizer runtimes included, and
 * must not enter them before it knows the place is safe.
 *
 * The handler is installed with the rt_sigaction system call, not the C
 * library's sigaction: ThreadSanitizer intercepts sigaction and would hold
 * the signal back until the thread next enters one of its interceptors,
 * which a loop without calls never does; asked directly, the kernel runs
 * the handler on the interrupted fiber's own stack (no SA_ONSTACK).
 *
 * A request is safe to act on (checked in this order, each refusal
 * counted; the monitor asks again later, R1 in preempt.c):
 *   P1. the signal is ours (queued by this process, SI_QUEUE, carrying a
 *       live slot) and the fiber it names still runs on this worker;
 *   P2. the fiber is not inside usched_preempt_off (preempt_refused_off;
 *       it owes the yield, taken at its last usched_preempt_on);
 *   P3. the core does not hold the CPU: the worker is not half-way
 *       through a switch (sched_seq odd) and not running a policy's code
 *       for the core (nopreempt; place.c) (preempt_refused_lock). Every
 *       usched lock is taken and released inside libusched; the only user
 *       code the core calls while it may hold one is a policy's, so P3 and
 *       P4 together mean no usched lock is held;
 *   P4. the interrupted instruction is the program's own code - the main
 *       executable's text, less libusched's when it is linked in
 *       statically (the section usched_text, CMakeLists.txt) - and the
 *       stack pointer is on the fiber's stack (preempt_refused_unsafe).
 *       So not the C library, the dynamic loader, the vDSO, libusched,
 *       the C++ runtime or a sanitizer runtime (shared objects all), whose
 *       internal state (a malloc arena lock, stdio's buffer lock) a switch
 *       to another fiber on this thread could find half-changed.
 * Then the fiber yields from inside the handler (usched__preempt_leave,
 * sched.c). The signal frame below it holds the interrupted registers,
 * the whole FP/SIMD state (XSAVE on x86-64, FPSIMD and SVE on aarch64) and
 * the signal mask, and the kernel built it below the x86-64 red zone. When
 * the fiber is resumed, on any worker, the handler returns and rt_sigreturn
 * restores all of it on that thread - all but the alternate signal stack
 * and the signal mask, which stay that thread's (frame_to_this_thread).
 * SA_NODEFER keeps the signal unblocked while the fiber is away, so the
 * worker's other fibers stay preemptible.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "arch/arch.h"
#include "core/core.h"
#include "core/preempt.h"

/* libusched's code when it is linked into the executable (the static
 * library's code sections are renamed usched_text: CMakeLists.txt); the
 * linker defines these only then. */
extern const char __start_usched_text[] __attribute__((weak, visibility("hidden")));
extern const char __stop_usched_text[] __attribute__((weak, visibility("hidden")));

#define MAX_RANGES 16

/* The program's own code, computed once, read by every handler. */
static struct {
    uintptr_t lo[MAX_RANGES], hi[MAX_RANGES];
    uintptr_t ex_lo, ex_hi; /* libusched inside the executable */
    _Atomic int n;          /* published with release after the ranges */
    bool done;              /* under sig_lock */
} code;

static pthread_mutex_t sig_lock = PTHREAD_MUTEX_INITIALIZER;
static bool installed[65];  /* under sig_lock */
static pid_t self_pid;      /* written before the first install, under sig_lock */

/* The kernel's struct sigaction (x86-64 and aarch64 alike). */
struct ksigaction {
    void (*handler)(int, siginfo_t *, void *);
    unsigned long flags;
    void (*restorer)(void);
    uint64_t mask;
};

static int ksigaction(int sig, const struct ksigaction *act, struct ksigaction *old)
{
    return syscall(SYS_rt_sigaction, sig, act, old, sizeof(uint64_t)) < 0 ? -errno : 0;
}

static bool own_code(uintptr_t pc)
{
    int n = atomic_load_explicit(&code.n, memory_order_acquire);
    if (pc >= code.ex_lo && pc < code.ex_hi) return false;
    for (int i = 0; i < n; i++)
        if (pc >= code.lo[i] && pc < code.hi[i]) return true;
    return false;
}

/* Writes errno on the thread the fiber resumed on: errno's address is the
 * thread's, and a compiler may keep the one it computed before the switch
 * (__errno_location is a const function). Not inlined, and the empty asm
 * keeps a compiler from treating it as free of side effects (clang has no
 * noipa). */
__attribute__((noinline)) static void set_errno(int e)
{
    __asm__ volatile("" ::: "memory");
    errno = e;
}

/* The fiber resumed on another worker's thread: the frame's alternate
 * signal stack and signal mask are the first thread's, and rt_sigreturn
 * would install them on this one. The alternate stack especially: two
 * workers would then share the one of the first (the stack overflow
 * handler's, stack.c), which that worker frees when it stops. They become
 * this thread's own, as after any switch. Raw system calls: no interceptor
 * of a sanitizer runs here. */
static void frame_to_this_thread(void *uc)
{
    ucontext_t *u = uc;
    stack_t ss;
    uint64_t mask;
    if (syscall(SYS_sigaltstack, NULL, &ss) == 0) u->uc_stack = ss;
    if (syscall(SYS_rt_sigprocmask, SIG_SETMASK, NULL, &mask, sizeof mask) == 0)
        memcpy(&u->uc_sigmask, &mask, sizeof mask); /* the kernel's mask is the first 64 bits */
}

static void on_preempt(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    if (si->si_code != SI_QUEUE || si->si_pid != self_pid) return; /* P1 */
    struct usched__preempt_cpu *pc = si->si_value.sival_ptr;
    if (!pc || pc->magic != USCHED__PREEMPT_MAGIC) return;
    struct usched__wk *w = pc->w;
    uint64_t want = atomic_exchange_explicit(&pc->req, 0, memory_order_acquire);
    struct usched_task *t = w->cur;
    uintptr_t sp = usched__uc_sp(uc);
    int v;
    if (!want || !t || t->id != want) {
        v = PREEMPT_GONE; /* it switched since the monitor looked: not counted */
    } else if (atomic_load_explicit(&t->preempt_off, memory_order_relaxed)) { /* P2 */
        atomic_store_explicit(&t->preempt_owed, 1, memory_order_relaxed);
        v = PREEMPT_OFF;
    } else if ((atomic_load_explicit(&w->sched_seq, memory_order_relaxed) & 1) ||
               atomic_load_explicit(&w->nopreempt, memory_order_relaxed)) { /* P3 */
        v = PREEMPT_LOCK;
    } else if (!own_code(usched__uc_pc(uc)) || sp < (uintptr_t)t->fctx.stack_lo ||
               sp >= (uintptr_t)t->fctx.stack_lo + t->fctx.stack_size) { /* P4 */
        v = PREEMPT_UNSAFE;
    } else {
        v = PREEMPT_TAKEN;
    }
    atomic_store_explicit(&pc->verdict, (uint32_t)v, memory_order_relaxed);
    static const int stat[] = {[PREEMPT_TAKEN] = USCHED_STAT_preempts,
                               [PREEMPT_OFF] = USCHED_STAT_preempt_refused_off,
                               [PREEMPT_LOCK] = USCHED_STAT_preempt_refused_lock,
                               [PREEMPT_UNSAFE] = USCHED_STAT_preempt_refused_unsafe};
    if (v == PREEMPT_GONE) return;
    usched__stat_add(&w->stats, stat[v], 1);
    if (v != PREEMPT_TAKEN) return;
    atomic_store_explicit(&pc->last_pc, usched__uc_pc(uc), memory_order_relaxed);
    int e = errno;
    usched__preempt_leave(w);
    /* Resumed, perhaps on another worker: w is stale from here on. */
    if (usched__self_wk() != w) frame_to_this_thread(uc);
    set_errno(e);
}

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    int n = 0;
    for (int i = 0; i < info->dlpi_phnum && n < MAX_RANGES; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        code.lo[n] = info->dlpi_addr + ph->p_vaddr;
        code.hi[n] = code.lo[n] + ph->p_memsz;
        n++;
    }
    /* libusched linked in without its code in usched_text (a build other
     * than this project's, or its code compiled again by the program's LTO
     * link): its code cannot be told from the program's, so no place
     * counts as the program's own. */
    uintptr_t self = (uintptr_t)(void *)usched__preempt_sig_install;
    bool ours_inside = false;
    for (int i = 0; i < n; i++) ours_inside |= self >= code.lo[i] && self < code.hi[i];
    if (__start_usched_text && __stop_usched_text) {
        code.ex_lo = (uintptr_t)__start_usched_text;
        code.ex_hi = (uintptr_t)__stop_usched_text;
    }
    if (ours_inside && !(self >= code.ex_lo && self < code.ex_hi)) n = 0;
    atomic_store_explicit(&code.n, n, memory_order_release);
    return 1; /* the main program comes first: stop there */
}

int usched__preempt_sig_install(int sig)
{
    int rc = 0;
    pthread_mutex_lock(&sig_lock);
    if (installed[sig]) goto out;
    struct ksigaction old;
    if ((rc = ksigaction(sig, NULL, &old)) < 0) goto out;
    if ((uintptr_t)old.handler != (uintptr_t)SIG_DFL && (uintptr_t)old.handler != (uintptr_t)SIG_IGN) {
        rc = -EBUSY;
        goto out;
    }
    if (!code.done) {
        self_pid = getpid();
        dl_iterate_phdr(phdr_cb, NULL);
        code.done = true;
    }
    struct ksigaction act = {.handler = on_preempt,
                             .flags = SA_SIGINFO | SA_RESTART | SA_NODEFER | USCHED__SA_RESTORER,
                             .restorer = USCHED__SIG_RESTORER};
    if ((rc = ksigaction(sig, &act, NULL)) == 0) installed[sig] = true;
out:
    pthread_mutex_unlock(&sig_lock);
    return rc;
}
