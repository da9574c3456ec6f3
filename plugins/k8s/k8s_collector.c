/*
 * eai-k8s-collector: the k8s backend's collect, inside the sandbox pod.
 *
 * Runs as a native sidecar (an init container with restartPolicy: Always)
 * sharing the pod's /tmp emptyDir, read-only.  It waits, doing nothing, for
 * the SIGTERM the kubelet sends sidecars once the `sandbox` container has
 * exited, then walks the collect paths with the very code the gVisor and
 * Kata backends use on their tmpfs (plugins/common/pc_collect.c: same
 * order, caps, refusals, no symlink followed) and writes what it found to
 * its stdout, which the backend reads through the pod's log API:
 *
 *   EAI-COLLECT 1 <nfiles> <truncated 0|1>
 *   <base64 path> <bytes> <base64 data>        one line per file
 *   EAI-COLLECT-END
 *
 * argv: MAX_FILES MAX_FILE_BYTES MAX_TOTAL_BYTES PATH...  (docs/kubernetes.md)
 * A static executable: the image holding it needs nothing else.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eai_pc.h"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void put_b64(const unsigned char *d, size_t n)
{
    char out[4];
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)d[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)d[i + 1] << 8;
        if (i + 2 < n)
            v |= d[i + 2];
        out[0] = b64[(v >> 18) & 63];
        out[1] = b64[(v >> 12) & 63];
        out[2] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
        out[3] = i + 2 < n ? b64[v & 63] : '=';
        fwrite(out, 1, 4, stdout);
    }
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: eai-k8s-collector MAX_FILES MAX_FILE_BYTES MAX_TOTAL_BYTES PATH...\n");
        return 2;
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sig = 0;
    sigwait(&set, &sig); /* the kubelet: `sandbox` has exited */

    struct eai_iso_job job;
    memset(&job, 0, sizeof job);
    job.collect = (const char *const *)(argv + 4);
    job.collect_max_files = strtoll(argv[1], NULL, 10);
    job.collect_max_file_bytes = strtoll(argv[2], NULL, 10);
    job.collect_max_total_bytes = strtoll(argv[3], NULL, 10);
    struct eai_pc_collect_result r;
    eai_pc_collect("/", 1, &job, &r); /* reads //tmp */
    printf("EAI-COLLECT 1 %zu %d\n", r.nfiles, r.truncated ? 1 : 0);
    for (size_t i = 0; i < r.nfiles; i++) {
        put_b64((const unsigned char *)r.files[i].path, strlen(r.files[i].path));
        printf(" %zu ", r.files[i].len);
        put_b64(r.files[i].data, r.files[i].len);
        putchar('\n');
    }
    printf("EAI-COLLECT-END\n");
    fflush(stdout);
    eai_pc_collect_free(&r);
    return 0;
}
