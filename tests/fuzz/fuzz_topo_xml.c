/*
 * Topology input as an hwloc XML file: the input is written to a temporary
 * file and loaded through the same path as `usched topo --input FILE`
 * (libxml2 reads and checks it, hwloc reads the document written anew:
 * src/topo/xmlcheck.c), then printed in every format. A refusal names the
 * file (or is the loader's own out-of-memory message).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "topo/topo.h"

static char path[64];

static void remove_file(void) { unlink(path); }

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(path, sizeof path, "/tmp/usched-fuzz-xml-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) abort();
    close(fd);
    atexit(remove_file);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536) return 0;
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) abort();
    usched__topo_t *t;
    char err[512];
    err[0] = '\0';
    if (usched__topo_load(&t, path, NULL, err, sizeof err) == 0) {
        if (usched__topo_ncpus(t) < 1) abort();
        fuzz_print_and_free(t);
    } else {
        char head[80];
        snprintf(head, sizeof head, "input '%s': ", path);
        /* the file named, or the loader's own "topology: out of memory" */
        if (strncmp(err, head, strlen(head)) != 0 && strncmp(err, "topology: ", 10) != 0) abort();
    }
    return 0;
}
