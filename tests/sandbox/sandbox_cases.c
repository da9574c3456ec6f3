/*
 * The cases every local sandbox backend must pass, written once and run
 * against the backend under test (sandbox.h): what differs between them
 * (image, limits, the programs their image has) comes from g_be.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errors.h"
#include "sandbox.h"

static void test_probe_ready(void)
{
    struct eai_iso_probe p;
    g_ops->probe(g_iso, &p);
    CU_ASSERT_EQUAL(p.ready, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(p.version, g_be->version_has));
    CU_ASSERT(p.caps & EAI_ISO_CAP_LOCAL_IMAGES);
    CU_ASSERT(p.caps & EAI_ISO_CAP_MEMORY_LIMIT);
    CU_ASSERT(p.caps & EAI_ISO_CAP_FILES);
}

static void test_success(void)
{
    const char *argv[] = {"sh", "-c", "echo hello; echo to-err >&2; id -u; pwd", NULL};
    struct iso_run *r = sb_run_new(argv);
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT_EQUAL(r->started, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r->out, "hello\n65534\n/tmp\n");
    CU_ASSERT_STRING_EQUAL(r->err, "to-err\n");
    CU_ASSERT(r->dur > 0);
    CU_ASSERT(r->cpu > 0);
    CU_ASSERT(r->mbs > 0);
    free(r);
    g_be->assert_clean();
}

void sb_test_exit_codes(void)
{
    const char *a1[] = {"sh", "-c", "echo oops >&2; exit 3", NULL};
    struct iso_run *r = sb_run_new(a1);
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 3);
    CU_ASSERT_EQUAL(r->sig, 0);
    CU_ASSERT_STRING_EQUAL(r->err, "oops\n");
    free(r);
    /* A signal kills a child, whose status the shell passes on (pid 1 may
     * ignore signals it has no handler for, even its own). */
    const char *a2[] = {"sh", "-c", "sh -c 'kill -TERM $$; sleep 5'; exit $?", NULL};
    r = sb_run_new(a2);
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 143);
    CU_ASSERT_EQUAL(r->sig, 15);
    free(r);
    const char *a3[] = {"no-such-command-here", NULL};
    r = sb_run_new(a3);
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 127);
    free(r);
    /* A plain exit 137 is not an OOM. */
    const char *a4[] = {"sh", "-c", "exit 137", NULL};
    r = sb_run_new(a4);
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 137);
    free(r);
    g_be->assert_clean();
}

void sb_test_env_and_stdin(void)
{
    setenv("EAI_TEST_HOST_SECRET", "leak", 1);
    const char *argv[] = {"sh", "-c", "env | sort; cat", NULL};
    struct iso_run *r = sb_run_new(argv);
    r->env[0] = "FOO=bar";
    r->env[1] = NULL;
    r->job.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    r->job.stdin_data = (const unsigned char *)"from-stdin\n";
    r->job.stdin_len = 11;
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "FOO=bar\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "HOME=/tmp\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n"));
    for (int i = 0; i < 4 && g_be->env_has[i]; i++)
        CU_ASSERT_PTR_NOT_NULL(strstr(r->out, g_be->env_has[i]));
    CU_ASSERT_PTR_NULL(strstr(r->out, "EAI_TEST_HOST_SECRET"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "from-stdin\n"));
    unsetenv("EAI_TEST_HOST_SECRET");
    free(r);
    /* No stdin at all: the program reads EOF, it does not wait. */
    const char *a2[] = {"sh", "-c", "cat; echo eof", NULL};
    r = sb_run_new(a2);
    r->job.timeout_ms = 10000;
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 30), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_STRING_EQUAL(r->out, "eof\n");
    free(r);
    g_be->assert_clean();
}

static void test_read_only_root(void)
{
    const char *argv[] = {"sh", "-c", "touch /bin/x; echo rc=$?; echo w > /tmp/w && cat /tmp/w", NULL};
    struct iso_run *r = sb_run_new(argv);
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_STRING_EQUAL(r->out, "rc=1\nw\n");
    /* (runc says EROFS, gVisor EACCES first: each backend's own case
     * checks how its root is mounted) */
    free(r);
    /* Nothing was written into the image store. */
    char p[PATH_MAX + 64];
    struct stat st;
    snprintf(p, sizeof(p), "%s/bin/x", g_rootfs);
    CU_ASSERT_NOT_EQUAL(lstat(p, &st), 0);
    g_be->assert_clean();
}

static void test_files(void)
{
    static const char *collect[] = {"/tmp/outputs", "/tmp/single.txt", "/tmp/missing", NULL};
    struct eai_iso_file files[2] = {
        {.path = "/tmp/in/data.csv", .data = (const unsigned char *)"a,b\n1,2\n", .len = 8},
        {.path = "/tmp/in/deep/blob.bin", .data = (const unsigned char *)"\x00\x01\x02", .len = 3},
    };
    const char *script = "set -e; mkdir -p /tmp/outputs/sub; wc -c < /tmp/in/deep/blob.bin; "
                         "tr a-z A-Z < /tmp/in/data.csv > /tmp/outputs/result.csv; echo more >> /tmp/in/data.csv; "
                         "echo nested > /tmp/outputs/sub/n.txt; echo one > /tmp/single.txt; "
                         "ln -s /etc/passwd /tmp/outputs/link; ln -s / /tmp/outputs/rootdir; "
                         "mkfifo /tmp/outputs/fifo; yes | head -c 5000 > /tmp/outputs/zbig.bin";
    const char *argv[] = {"sh", "-c", script, NULL};
    struct iso_run *r = sb_run_new(argv);
    r->job.files = files;
    r->job.nfiles = 2;
    r->job.collect = collect;
    r->job.collect_max_file_bytes = 4096;
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_EQUAL(atoi(r->out), 3);
    CU_ASSERT_EQUAL(r->nfiles, 3);
    CU_ASSERT_STRING_EQUAL(r->fpath[0], "/tmp/outputs/result.csv");
    CU_ASSERT_STRING_EQUAL(r->fdata[0], "A,B\n1,2\n");
    CU_ASSERT_STRING_EQUAL(r->fpath[1], "/tmp/outputs/sub/n.txt");
    CU_ASSERT_STRING_EQUAL(r->fdata[1], "nested\n");
    CU_ASSERT_STRING_EQUAL(r->fpath[2], "/tmp/single.txt");
    CU_ASSERT_EQUAL(r->files_truncated, 1); /* zbig.bin over the per-file cap */
    for (int i = 0; i < r->nfiles; i++) {
        CU_ASSERT_PTR_NULL(strstr(r->fpath[i], "link"));
        CU_ASSERT_PTR_NULL(strstr(r->fdata[i], "root:"));
    }
    free(r);
    g_be->assert_clean();
    /* File count cap. */
    static const char *collect2[] = {"/tmp/o", NULL};
    const char *a2[] = {"sh", "-c", "mkdir /tmp/o; for i in 1 2 3 4 5; do echo $i > /tmp/o/f$i; done", NULL};
    r = sb_run_new(a2);
    r->job.collect = collect2;
    r->job.collect_max_files = 2;
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->nfiles, 2);
    CU_ASSERT_EQUAL(r->files_truncated, 1);
    free(r);
    /* A path outside /tmp is refused before anything runs. */
    struct eai_iso_file bad = {.path = "/etc/../tmp/x", .data = (const unsigned char *)"x", .len = 1};
    const char *a3[] = {"true", NULL};
    r = sb_run_new(a3);
    r->job.files = &bad;
    r->job.nfiles = 1;
    enum eai_code code = EAI_OK;
    CU_ASSERT_EQUAL(sb_run_job_on(NULL, r, 5, &code), -1);
    CU_ASSERT_EQUAL(code, EAI_E_VALIDATION_FAILED);
    free(r);
    g_be->assert_clean();
}

static void test_no_network(void)
{
    /* A listener on the host's loopback: the sandbox must not reach it. */
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    CU_ASSERT_FATAL(ls >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    CU_ASSERT_FATAL(bind(ls, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(ls, 4) == 0 &&
                    getsockname(ls, (struct sockaddr *)&a, &al) == 0);
    char buf[1024];
    const char *argv[4];
    g_be->net_argv(ntohs(a.sin_port), buf, sizeof(buf), argv);
    struct iso_run *r = sb_run_new(argv);
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "refused"));
    CU_ASSERT_PTR_NULL(strstr(r->out, "connected"));
    int c = accept(ls, NULL, NULL);
    CU_ASSERT_EQUAL(c, -1); /* nothing reached the host listener */
    if (c >= 0)
        close(c);
    close(ls);
    free(r);
    g_be->assert_clean();
}

static void test_oom(void)
{
    struct iso_run *r = sb_run_new(g_be->oom_argv);
    r->job.memory_bytes = g_be->oom_memory;
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_OOM);
    CU_ASSERT_PTR_NULL(strstr(r->out, "survived"));
    CU_ASSERT(r->dur < 20);
    free(r);
    g_be->assert_clean();
}

void sb_test_timeout(void)
{
    const char *argv[] = {"sh", "-c", "echo begun; sleep 30; echo never", NULL};
    struct iso_run *r = sb_run_new(argv);
    r->job.timeout_ms = 1500;
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 30), 0);
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_TIMEOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "begun"));
    CU_ASSERT_PTR_NULL(strstr(r->out, "never"));
    double took = r->t_done - r->t_started;
    CU_ASSERT(took >= 1.4);
    CU_ASSERT(took <= 1.5 + g_be->stop_max_s);
    free(r);
    g_be->assert_clean();
}

static int out_has_started(void *arg)
{
    struct iso_run *r = arg;
    return (strstr(r->out, "started") && r->started) || r->done;
}

static void test_cancel(void)
{
    const char *argv[] = {"sh", "-c", "echo started; sleep 30", NULL};
    struct iso_run *r = sb_run_new(argv);
    void *h = NULL;
    struct eai_error *err = NULL;
    CU_ASSERT_EQUAL_FATAL(g_ops->start(g_iso, &r->job, &iso_run_cb, r, &h, &err), 0);
    sb_loop_until(out_has_started, r, 30);
    CU_ASSERT_EQUAL(r->started, 1);
    double tc = iso_now_s();
    g_ops->cancel(g_iso, h);
    sb_loop_until(iso_run_done, r, 30);
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_CANCELLED);
    CU_ASSERT(r->t_done - tc < g_be->stop_max_s);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "started"));
    sb_loop(0.3);
    CU_ASSERT_EQUAL(r->done, 1); /* exactly once */
    free(r);
    g_be->assert_clean();
}

static void test_output_cap(void)
{
    /* 8 MiB written, 256 KiB delivered, and the program is not blocked. */
    const char *argv[] = {"sh", "-c", "yes 0123456789abcdef | head -c 8388608; echo done >&2", NULL};
    struct iso_run *r = sb_run_new(argv);
    r->job.output_bytes = 256 << 10;
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_EQUAL(r->out_total, (size_t)(256 << 10));
    CU_ASSERT_STRING_EQUAL(r->err, "done\n");
    free(r);
    g_be->assert_clean();
}

static int all_done(void *arg)
{
    struct iso_run **rs = arg;
    for (int i = 0; rs[i]; i++)
        if (!rs[i]->done)
            return 0;
    return 1;
}

static void test_parallel(void)
{
    /* Each its own /tmp and exit code; the last one runs out of memory. */
    enum { MAXN = 16 };
    int n = g_be->parallel < MAXN ? g_be->parallel : MAXN;
    struct iso_run *rs[MAXN + 1] = {NULL};
    char envs[MAXN][32];
    for (int i = 0; i < n; i++) {
        const char *argv[] = {"sh", "-c", "echo $JOB > /tmp/me; sleep 0.3; cat /tmp/me; ls /tmp | wc -l; exit $CODE",
                              NULL};
        rs[i] = i == n - 1 ? sb_run_new(g_be->oom_argv) : sb_run_new(argv);
        if (i == n - 1)
            rs[i]->job.memory_bytes = g_be->oom_memory;
        snprintf(envs[i], sizeof(envs[i]), "JOB=job-%d", i);
        rs[i]->env[0] = envs[i];
        rs[i]->env[1] = i % 2 ? "CODE=11" : "CODE=10";
        rs[i]->env[2] = NULL;
        void *h = NULL;
        struct eai_error *err = NULL;
        CU_ASSERT_EQUAL_FATAL(g_ops->start(g_iso, &rs[i]->job, &iso_run_cb, rs[i], &h, &err), 0);
    }
    sb_loop_until(all_done, rs, 180);
    for (int i = 0; i < n - 1; i++) {
        char want[64];
        snprintf(want, sizeof(want), "job-%d\n1\n", i);
        CU_ASSERT_EQUAL(rs[i]->done, 1);
        CU_ASSERT_EQUAL(rs[i]->outcome, EAI_OUT_EXITED);
        CU_ASSERT_EQUAL(rs[i]->exit_code, i % 2 ? 11 : 10);
        CU_ASSERT_STRING_EQUAL(rs[i]->out, want);
    }
    CU_ASSERT_EQUAL(rs[n - 1]->outcome, EAI_OUT_OOM);
    for (int i = 0; i < n; i++)
        free(rs[i]);
    g_be->assert_clean();
}

static void test_image_missing(void)
{
    const char *argv[] = {"true", NULL};
    struct iso_run *r = sb_run_new(argv);
    r->job.image = "no-such-image:1";
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 30), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_ERROR);
    CU_ASSERT_EQUAL(r->error_code, EAI_E_IMAGE_MISSING);
    CU_ASSERT_EQUAL(r->started, 0);
    free(r);
    g_be->assert_clean();
}

void sb_add_shared(CU_pSuite s)
{
    CU_add_test(s, "probe ready", test_probe_ready);
    CU_add_test(s, "success, stdout and stderr apart", test_success);
    CU_add_test(s, "exit codes", sb_test_exit_codes);
    CU_add_test(s, "env and stdin", sb_test_env_and_stdin);
    CU_add_test(s, "read-only root, writable /tmp", test_read_only_root);
    CU_add_test(s, "files in and out", test_files);
    CU_add_test(s, "no network", test_no_network);
    CU_add_test(s, "oom", test_oom);
    CU_add_test(s, "timeout", sb_test_timeout);
    CU_add_test(s, "cancel", test_cancel);
    CU_add_test(s, "output capped per stream", test_output_cap);
    CU_add_test(s, "parallel jobs, one OOM", test_parallel);
    CU_add_test(s, "image missing", test_image_missing);
}
