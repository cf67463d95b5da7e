#ifndef USCHED_EXPORT_H
#define USCHED_EXPORT_H
/* Marks a public API function (the library is built with -fvisibility=hidden). */
#define USCHED_EXPORT __attribute__((visibility("default")))
/* Every thread-local variable of the library: initial-exec, so that a
 * worker finds its state with one %fs-relative load (tpidr_el0 on aarch64)
 * in the shared library too, instead of a call to __tls_get_addr. A
 * rendezvous round trip looks its worker up about ten times: through
 * libusched.so it took 86.8 ns with __tls_get_addr, 78.9 ns without
 * (docs/design.md, "The shared library's thread-locals"). The cost: the
 * variables (about 310 bytes) live in the static TLS block, which a library
 * loaded with dlopen takes from glibc's reserve (512 bytes by default,
 * glibc.rtld.optional_static_tls). */
#define USCHED_TLS __thread __attribute__((tls_model("initial-exec")))
#endif
