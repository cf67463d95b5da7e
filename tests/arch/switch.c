/*
 * The raw context switch (arch/arch.h): values survive a million ping-pongs,
 * many contexts round-robin, callee-saved registers and FP control words are
 * per context, entry runs on an ABI-aligned stack, and a returning entry
 * traps. Also built for aarch64 and run under qemu (cross-aarch64.sh).
 */
#include <fenv.h>
#include <signal.h>
#include <stdalign.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arch/arch.h"
#include "test.h"

#if defined(__x86_64__)
enum { NREGS = 6 };           /* rbx rbp r12 r13 r14 r15 */
#define TRAP_SIGNAL SIGILL     /* ud2 */
#else
enum { NREGS = 19 };          /* x19-x28, x29, d8-d15 */
#define TRAP_SIGNAL SIGTRAP    /* brk */
#endif

/* regs_<isa>.S */
void regs_switch(usched__ctx_t *from, usched__ctx_t *to, const uint64_t *in, uint64_t *out);

enum { STACK = 64 << 10 };

#if defined(__SANITIZE_ADDRESS__)
#define ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN 1
#endif
#endif
#if ASAN
#include <sanitizer/asan_interface.h>
#endif

/* The raw switch tells ASan nothing: memory reused for a new context keeps
 * the redzones of frames that never returned (fctx_make clears them). */
static void stack_reuse(void *mem, size_t size)
{
#if ASAN
    __asan_unpoison_memory_region(mem, size);
#else
    (void)mem;
    (void)size;
#endif
}

static void *stack_new(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT(p != MAP_FAILED);
    return p;
}

static usched__ctx_t host;

/* ---- ping-pong ------------------------------------------------------------ */

static usched__ctx_t ping_ctx, pong_ctx;
static volatile uint64_t token;
static long rounds;
static uint64_t ping_sum;

static void ping(void *arg)
{
    ASSERT(arg == &ping_ctx);
    uint64_t sum = 0; /* lives in a callee-saved register across switches */
    for (long i = 0; i < rounds; i++) {
        token = 2 * (uint64_t)i + 1;
        usched__ctx_switch(&ping_ctx, &pong_ctx);
        if (token != 2 * (uint64_t)i + 2)
            ASSERT_EQ_U(token, 2 * (uint64_t)i + 2);
        sum += token;
    }
    ping_sum = sum;
    usched__ctx_switch(&ping_ctx, &host);
}

static void pong(void *arg)
{
    ASSERT(arg == &pong_ctx);
    for (uint64_t i = 0;; i++) {
        if (token != 2 * i + 1)
            ASSERT_EQ_U(token, 2 * i + 1);
        token = 2 * i + 2;
        usched__ctx_switch(&pong_ctx, &ping_ctx);
    }
}

static void test_pingpong(void)
{
    void *s1 = stack_new(STACK), *s2 = stack_new(STACK);
    rounds = test_scale(1000000);
    usched__ctx_make(&ping_ctx, s1, STACK, ping, &ping_ctx, usched__ctx_fpmode());
    usched__ctx_make(&pong_ctx, s2, STACK, pong, &pong_ctx, usched__ctx_fpmode());
    double t0 = test_now();
    usched__ctx_switch(&host, &ping_ctx);
    double t = test_now() - t0;
    /* sum of 2i+2 for i < rounds = rounds * (rounds + 1) */
    ASSERT_EQ_U(ping_sum, (uint64_t)rounds * (uint64_t)(rounds + 1));
    printf("pingpong: %ld round trips, %.1f ns per switch\n", rounds, t * 1e9 / (2.0 * (double)rounds));
    munmap(s1, STACK);
    munmap(s2, STACK);
}

/* ---- round robin ---------------------------------------------------------- */

enum { RR_N = 256 };
static usched__ctx_t rr_ctx[RR_N];
static long rr_count[RR_N], rr_rounds;

static void rr_entry(void *arg)
{
    long id = (long)(intptr_t)arg;
    for (long r = 0; r < rr_rounds; r++) {
        rr_count[id]++;
        if (id == RR_N - 1 && r == rr_rounds - 1)
            usched__ctx_switch(&rr_ctx[id], &host);
        usched__ctx_switch(&rr_ctx[id], &rr_ctx[(id + 1) % RR_N]);
    }
    TEST_FAIL_("context %ld ran past its last round", id);
}

static void test_round_robin(void)
{
    enum { SZ = 16 << 10 };
    char *mem = stack_new((size_t)RR_N * SZ);
    rr_rounds = test_scale(1000);
    for (long i = 0; i < RR_N; i++)
        usched__ctx_make(&rr_ctx[i], mem + i * SZ, SZ, rr_entry, (void *)(intptr_t)i, usched__ctx_fpmode());
    usched__ctx_switch(&host, &rr_ctx[0]);
    for (long i = 0; i < RR_N; i++)
        ASSERT_EQ(rr_count[i], rr_rounds);
    printf("round robin: %d contexts x %ld rounds\n", RR_N, rr_rounds);
    munmap(mem, (size_t)RR_N * SZ);
}

/* ---- alignment ------------------------------------------------------------ */

static usched__ctx_t al_ctx;
static uintptr_t al_frame, al_local;
static char al_text[32];

static void al_entry(void *arg)
{
    (void)arg;
    alignas(max_align_t) char local[sizeof(max_align_t)];
    uintptr_t p = (uintptr_t)local;
    __asm__ __volatile__("" : "+r"(p)); /* the compiler may not assume it */
    al_local = p;
    al_frame = (uintptr_t)__builtin_frame_address(0);
    /* printf of a double uses aligned SSE stores on x86-64 */
    snprintf(al_text, sizeof al_text, "%.2f %Lf", 1.25, (long double)2.5);
    usched__ctx_switch(&al_ctx, &host);
}

static void test_alignment(void)
{
    char *mem = stack_new(STACK);
    /* Unaligned bounds: make must align the top itself. */
    static const size_t skew[][2] = { { 0, STACK }, { 8, STACK - 8 }, { 24, STACK - 40 },
                                      { 3, STACK - 7 }, { 0, STACK - 1 } };
    for (size_t i = 0; i < sizeof skew / sizeof skew[0]; i++) {
        al_frame = al_local = 1;
        stack_reuse(mem, STACK);
        usched__ctx_make(&al_ctx, mem + skew[i][0], skew[i][1], al_entry, NULL, usched__ctx_fpmode());
        usched__ctx_switch(&host, &al_ctx);
        ASSERT_EQ(al_frame % 16, 0);
        ASSERT_EQ(al_local % alignof(max_align_t), 0);
        ASSERT(al_frame > (uintptr_t)mem && al_frame < (uintptr_t)mem + STACK);
        ASSERT_STR_EQ(al_text, "1.25 2.500000");
    }
    munmap(mem, STACK);
}

/* ---- callee-saved registers ----------------------------------------------- */

static usched__ctx_t rg_ctx;
static uint64_t rg_in_host[NREGS], rg_in_fiber[NREGS], rg_out_fiber[NREGS];
static int rg_fiber_checks;

static void fill(uint64_t *v, uint64_t seed)
{
    for (int i = 0; i < NREGS; i++)
        v[i] = seed * 0x9e3779b97f4a7c15ull + (uint64_t)i * 0x0101010101010101ull;
}

static void rg_entry(void *arg)
{
    (void)arg;
    for (uint64_t k = 1;; k++) {
        fill(rg_in_fiber, 1000 + k);
        regs_switch(&rg_ctx, &host, rg_in_fiber, rg_out_fiber);
        for (int i = 0; i < NREGS; i++)
            ASSERT_EQ_U(rg_out_fiber[i], rg_in_fiber[i]);
        rg_fiber_checks++;
    }
}

static void test_registers(void)
{
    uint64_t out[NREGS];
    void *mem = stack_new(STACK);
    usched__ctx_make(&rg_ctx, mem, STACK, rg_entry, NULL, usched__ctx_fpmode());
    for (uint64_t k = 1; k <= 100; k++) {
        fill(rg_in_host, k);
        regs_switch(&host, &rg_ctx, rg_in_host, out);
        for (int i = 0; i < NREGS; i++)
            ASSERT_EQ_U(out[i], rg_in_host[i]);
    }
    ASSERT_EQ(rg_fiber_checks, 99);
    munmap(mem, STACK);
}

/* ---- FP control words ----------------------------------------------------- */

static usched__ctx_t fp_ctx;
static int fp_seen_first, fp_seen_second;

/* The rounding mode as each control register holds it (x86-64: SSE and
 * x87 separately; they must agree). */
static int rounding(void)
{
#if defined(__x86_64__)
    static const int from_rc[4] = { FE_TONEAREST, FE_DOWNWARD, FE_UPWARD, FE_TOWARDZERO };
    uint32_t mxcsr = __builtin_ia32_stmxcsr();
    uint16_t fcw;
    __asm__ __volatile__("fnstcw %0" : "=m"(fcw));
    int sse = from_rc[(mxcsr >> 13) & 3], x87 = from_rc[(fcw >> 10) & 3];
    ASSERT_EQ(sse, x87);
    return sse;
#else
    return fegetround();
#endif
}

static void fp_entry(void *arg)
{
    (void)arg;
    fp_seen_first = rounding();
    fesetround(FE_UPWARD);
    usched__ctx_switch(&fp_ctx, &host);
    fp_seen_second = rounding();
    usched__ctx_switch(&fp_ctx, &host);
    TEST_FAIL_("fp fiber resumed a third time");
}

static void test_fp_control(void)
{
    void *mem = stack_new(STACK);
    ASSERT_EQ(fesetround(FE_DOWNWARD), 0);
    usched__ctx_make(&fp_ctx, mem, STACK, fp_entry, NULL, usched__ctx_fpmode()); /* DOWNWARD */
    ASSERT_EQ(fesetround(FE_TOWARDZERO), 0);
    usched__ctx_switch(&host, &fp_ctx);
    ASSERT_EQ(rounding(), FE_TOWARDZERO);
    ASSERT_EQ(fp_seen_first, FE_DOWNWARD);
    usched__ctx_switch(&host, &fp_ctx);
    ASSERT_EQ(rounding(), FE_TOWARDZERO);
    ASSERT_EQ(fp_seen_second, FE_UPWARD);
    ASSERT_EQ(fesetround(FE_TONEAREST), 0);
    munmap(mem, STACK);
}

#if defined(__x86_64__)
/* One control word changed at a time (the switch loads each only when it
 * differs): MXCSR's flush-to-zero bit alone, then the x87 precision field
 * alone, each kept by the fiber and never seen by the host. */
static uint32_t cw_mxcsr(void)
{
    return __builtin_ia32_stmxcsr();
}

static uint16_t cw_x87(void)
{
    uint16_t fcw;
    __asm__ __volatile__("fnstcw %0" : "=m"(fcw));
    return fcw;
}

static void cw_set_x87(uint16_t fcw)
{
    __asm__ __volatile__("fldcw %0" : : "m"(fcw));
}

static usched__ctx_t cw_ctx;
static uint32_t cw_fiber_mxcsr;
static uint16_t cw_fiber_x87;

static void cw_entry(void *arg)
{
    (void)arg;
    __builtin_ia32_ldmxcsr(cw_mxcsr() | 0x8000u); /* FTZ only */
    cw_fiber_mxcsr = cw_mxcsr();
    usched__ctx_switch(&cw_ctx, &host);
    ASSERT_EQ(cw_mxcsr(), cw_fiber_mxcsr);
    cw_set_x87((uint16_t)(cw_x87() & ~0x0300u)); /* single precision only */
    cw_fiber_x87 = cw_x87();
    usched__ctx_switch(&cw_ctx, &host);
    ASSERT_EQ(cw_x87(), cw_fiber_x87);
    ASSERT_EQ(cw_mxcsr(), cw_fiber_mxcsr);
    usched__ctx_switch(&cw_ctx, &host);
    TEST_FAIL_("control-word fiber resumed a fourth time");
}

static void test_control_words_one_at_a_time(void)
{
    void *mem = stack_new(STACK);
    uint32_t m0 = cw_mxcsr();
    uint16_t x0 = cw_x87();
    usched__ctx_make(&cw_ctx, mem, STACK, cw_entry, NULL, usched__ctx_fpmode());
    usched__ctx_switch(&host, &cw_ctx);
    ASSERT_EQ(cw_mxcsr(), m0); /* only MXCSR differed */
    ASSERT_EQ(cw_x87(), x0);
    usched__ctx_switch(&host, &cw_ctx);
    ASSERT_EQ(cw_x87(), x0); /* only the x87 word differed */
    ASSERT_EQ(cw_mxcsr(), m0);
    usched__ctx_switch(&host, &cw_ctx);
    ASSERT_EQ(cw_x87(), x0);
    munmap(mem, STACK);
}
#endif

/* ---- returning entry traps ------------------------------------------------ */

static usched__ctx_t ret_ctx;
static void ret_entry(void *arg)
{
    (void)arg;
}

static void test_return_traps(void)
{
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        signal(TRAP_SIGNAL, SIG_DFL);
        void *mem = stack_new(STACK);
        usched__ctx_make(&ret_ctx, mem, STACK, ret_entry, NULL, usched__ctx_fpmode());
        usched__ctx_switch(&host, &ret_ctx);
        _exit(0);
    }
    int st;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT(WIFSIGNALED(st));
    ASSERT_EQ(WTERMSIG(st), TRAP_SIGNAL);
}

int main(void)
{
    test_pingpong();
    test_round_robin();
    test_alignment();
    test_registers();
    test_fp_control();
#if defined(__x86_64__)
    test_control_words_one_at_a_time();
#endif
    test_return_traps();
    printf("arch switch: ok\n");
    return 0;
}
