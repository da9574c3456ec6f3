/* eaid: `eaid serve` and the admin CLI (docs/api.md, docs/configuration.md). */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon.h"
#include "cli.h"

int main(int argc, char **argv)
{
    /* Everything eaid creates (database, WAL, spool, bundles, keys) is
     * private to its user; `eaid images build` widens it again for image
     * trees, which the sandbox user must read (docs/configuration.md). */
    umask(077);
    const char *config = NULL;
    char *rest[256];
    int n = 0;
    /* --config FILE may come anywhere before or after the command */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 || strcmp(argv[i], "-c") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "eaid: --config needs a file\n");
                return 2;
            }
            config = argv[++i];
        } else if (strncmp(argv[i], "--config=", 9) == 0) {
            config = argv[i] + 9;
        } else if (n < (int)(sizeof(rest) / sizeof(rest[0])) - 1) {
            rest[n++] = argv[i];
        }
    }
    rest[n] = NULL;
    if (n == 0 || strcmp(rest[0], "help") == 0 || strcmp(rest[0], "--help") == 0 || strcmp(rest[0], "-h") == 0) {
        eai_cli_usage();
        return n == 0 ? 2 : 0;
    }
    if (strcmp(rest[0], "serve") == 0) {
        if (n > 1) {
            fprintf(stderr, "usage: eaid serve [--config FILE]\n");
            return 2;
        }
        /* One malloc arena for every thread: workers (storage, runsc
         * helpers) otherwise make one 64 MiB-reserved arena each, and
         * what they touch stays resident after a load (+2.5 MiB after the
         * GET bench, docs/performance.md "Memory").  Their allocations are
         * few; the loop's small ones come from its thread cache.  The
         * environment still decides when it says anything. */
        if (!getenv("MALLOC_ARENA_MAX") && !getenv("GLIBC_TUNABLES"))
            mallopt(M_ARENA_MAX, 1);
        return eai_app_serve(config);
    }
    return eai_cli_run(config, n, rest);
}
