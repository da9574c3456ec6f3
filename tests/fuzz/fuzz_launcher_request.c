/* A session supervisor's request body -> eai_launcher_request_parse
 * (plugins/gvisor/launcher/eai_launcher_session.c, compiled in): the bytes
 * come from any process of a session's sandbox.  Invariants: an accepted
 * request starts with the magic and ends with a NUL; cwd, every argv and
 * env string lie inside it; argv has at least one string; both arrays end
 * with NULL; parsing again gives the same answer. */
#include "fuzz_util.h"
#include "eai_launcher.h"

static int inside(const char *p, const char *buf, size_t size)
{
    return p >= buf && p < buf + size && memchr(p, '\0', (size_t)(buf + size - p)) != NULL;
}

static size_t check_list(char **v, const char *buf, size_t size)
{
    size_t n = 0;
    FZ_ASSERT(v != NULL);
    for (; v[n]; n++)
        FZ_ASSERT(inside(v[n], buf, size));
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    const char *cwd = NULL;
    char **argv = NULL, **envp = NULL;
    int rc = eai_launcher_request_parse(buf, size, &cwd, &argv, &envp);
    if (rc == 0) {
        FZ_ASSERT(size >= 10 && !memcmp(buf, "EAI-RUN-1", 10) && buf[size - 1] == '\0');
        FZ_ASSERT(inside(cwd, buf, size));
        size_t argc = check_list(argv, buf, size), envc = check_list(envp, buf, size);
        FZ_ASSERT(argc >= 1);
        const char *cwd2 = NULL;
        char **argv2 = NULL, **envp2 = NULL;
        FZ_ASSERT(eai_launcher_request_parse(buf, size, &cwd2, &argv2, &envp2) == 0);
        FZ_ASSERT(cwd2 == cwd && check_list(argv2, buf, size) == argc && check_list(envp2, buf, size) == envc);
        free(argv2);
        free(envp2);
        free(argv);
        free(envp);
    } else {
        FZ_ASSERT(rc == -1);
    }
    free(buf);
    return 0;
}
