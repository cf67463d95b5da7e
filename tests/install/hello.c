/* Built against an installed usched: calls only the error functions, which
 * need no scheduler. Prints "usched <version> ok" and exits 0 on success. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <usched.h>

int main(void)
{
    const char *e = usched_strerror(-EINVAL);
    if (!e || strcmp(e, "invalid argument") != 0) {
        fprintf(stderr, "usched_strerror(-EINVAL): got \"%s\", expected \"invalid argument\"\n",
                e ? e : "(null)");
        return 1;
    }
    const char *last = usched_last_error();
    if (!last || last[0] != '\0') {
        fprintf(stderr, "usched_last_error() before any failure: got \"%s\", expected \"\"\n",
                last ? last : "(null)");
        return 1;
    }
    printf("usched %s ok\n", USCHED_VERSION_STRING);
    return 0;
}
